/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * R, the rogue peer of ibf_hostile: an ibfab RDM endpoint's part played
 * with librdmacm and verbs alone, so it can say what ibfab never would.
 * White-box: it speaks ibfab's wire format (ibf_rdm.h).
 */
#ifndef IBF_ROGUE_H
#define IBF_ROGUE_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "ibf_atomic_ops.h"	/* the atomic request format */
#include "ibf_rdm.h"	/* the wire format, and names */
#include "ibft.h"
#include "ibft_rdm_node.h"

#define ROGUE_BUF (64 << 10)
#define ROGUE_DEPTH 64

struct rogue {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint32_t mine;		/* A's index of R's connection */
	int outstanding;
};

/* R's key: what it puts in names it claims.  It does not know A's or B's. */
#define ROGUE_KEY 0x0badc0de0badc0deull

#define FLOOD 300
struct flood_count {
	int accepted, busy, refused, unanswered;
};

/* ibf_rogue.c says what each does. */
void rogue_close(struct rogue *g);
int rogue_connect_key(struct rogue *g, const char *src, const char *claim,
		      uint16_t port, uint64_t key, const struct sockaddr *a);
int rogue_connect(struct rogue *g, const char *src, const char *claim,
		  uint16_t port, const struct sockaddr *a);
int rogue_send(struct rogue *g, const void *msg, uint32_t len);
void rogue_drain(struct rogue *g);
int has_comp(struct node *n, void *ctx, int ms, struct comp *out);
void rogue_flood(const char *host, const struct sockaddr *a,
		 const struct ibf_name *claim, struct flood_count *n);
void hdr_init(struct ibf_rdm_hdr *h, uint8_t type, uint32_t conn, uint64_t tag);
int rogue_eager(struct rogue *g, uint64_t tag, const char *text);
int rogue_write_imm(struct rogue *g, uint64_t addr, uint32_t key, uint32_t seq);
int rogue_recv(struct rogue *g, uint8_t **at);
int rogue_recv_wait(struct rogue *g, int ms);
int rogue_reaches(struct rogue *g, struct node *t, uint64_t tag, int ms);

/* ibf_hostile_limits.c: -t share and -t cap. */
void share_flood(void);
void conn_cap(void);

#endif
