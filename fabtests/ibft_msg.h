/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What ibft_msg's test files share: its options and small helpers. */
#ifndef IBFT_MSG_H
#define IBFT_MSG_H

#include "ibft.h"

/* From the command line (ibft_msg.c's main). */
extern size_t max_size;
extern int use_fd;
extern struct ibft_conn_opts copts;

/* One completion from c's CQ, by spinning or (-w) on its fd; 1 or 0. */
int cq_one(struct ibft_conn *c, struct fi_cq_data_entry *e);

/* ibft_msg_tagged.c; tagged_offered: whether the provider offers
 * FI_TAGGED on FI_EP_MSG (a test skips if not). */
void tagged(void);
int tagged_offered(const char *test);
/* ibft_msg_threads.c */
void threads(struct ibft_conn *c);

#endif
