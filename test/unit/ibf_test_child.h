/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Unit tests that run part of themselves in a forked child: the child
 * runs under a deadline, so that a child that hangs fails its test by
 * name instead of holding up the whole run.
 */
#ifndef IBF_TEST_CHILD_H
#define IBF_TEST_CHILD_H

/* How long a child may take before it counts as hung. */
#define IBF_TEST_CHILD_SECONDS 10

/*
 * Run fn(arg) in a forked child, SIGABRT at its default action (not
 * Criterion's crash handler), and wait for it.  Returns the child's
 * wait status, or -1 if it could not be started or did not end within
 * IBF_TEST_CHILD_SECONDS (it is then killed).
 */
int ibf_test_child(int (*fn)(void *arg), void *arg);

#endif
