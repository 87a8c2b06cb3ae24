#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
set -e
cd "$(dirname "$0")"
mkdir -p m4
autoreconf -fi
