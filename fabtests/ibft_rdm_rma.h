/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What ibft_rdm_rma's test files share: regions, the endpoint pair. */
#ifndef IBFT_RDM_RMA_H
#define IBFT_RDM_RMA_H

#include <rdma/fi_atomic.h>

#include "ibft.h"
#include "ibft_rdm_node.h"

#define RBUF (1 << 20)

/* A registered buffer of n's: its key and the address peers name. */
struct region {
	uint8_t *buf;
	size_t len;
	struct fid_mr *mr;
	uint64_t key, addr;
	void *desc;
};
int region_open(struct node *n, struct region *r, size_t len,
		uint64_t access);
void region_close(struct region *r);
/* A local buffer as the provider wants it: registered only if it says so. */
int local_open(struct node *n, struct region *r, size_t len);

/* IBFT_MR_REQKEY=1: requested keys and offsets (reqkey), and the mr_mode
 * the endpoints ask for accordingly. */
extern int reqkey;
uint64_t rma_mr_mode(void);

/* The pair ibft_rdm_rma.c's main opens: ns[0] writes and reads tgt, a
 * region of ns[1], from loc. */
extern struct node *ns[2];
extern struct region tgt, loc;

/* ibft_rdm_rma_events.c */
void test_counters(void);
void counters_close(void);
void test_rma_event(uint64_t caps, const char *name);
void test_no_rma_caps(void);

#endif
