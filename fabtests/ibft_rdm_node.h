/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM endpoints for the test and benchmark programs (ibft_rdm,
 * ibft_rdm_bench): each "node" is an endpoint with its own fabric, domain,
 * AV and CQ, opened on -s or -d alternately; completions of every node
 * are read into per-node rings whenever any is waited for, since progress
 * may be manual.  Second processes are this program again (fork and exec),
 * talking through pipes.
 */
#ifndef IBFT_RDM_NODE_H
#define IBFT_RDM_NODE_H

#include <sys/types.h>

#include "ibft.h"

#define MAX_NODES 10
#define COMP_RING 1024
#define WAIT_MS 20000

struct comp {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
	int err;		/* 0, or the error entry's err */
	size_t olen;
	char why[96];		/* an error's fi_cq_strerror of its prov_errno */
};

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cq *tx_cq;	/* if set, sends complete there, apart */
	struct fid_ep *ep;
	uint8_t name[64];
	size_t namelen;
	fi_addr_t peer[MAX_NODES];	/* each node's fi_addr in our AV */
	fi_addr_t *av_map;		/* a named AV's fi_addrs (FI_READ) */
	struct comp ring[COMP_RING];
	unsigned head, tail;
};

extern struct node *nodes[MAX_NODES];
extern int nnodes;
/* What node_open asks for; FI_PROGRESS_UNSPEC: the provider's default. */
extern enum fi_progress want_progress;
extern enum fi_threading want_threading;
extern size_t want_rx_size;	/* rx_attr->size to ask for; 0: the default */
extern size_t want_tx_size;	/* tx_attr->size, the same */
/* A named AV to open (with want_av_flags, e.g. FI_READ), or NULL. */
extern const char *want_av_name;
extern uint64_t want_av_flags;
extern enum fi_wait_obj want_wait;	/* the CQ's wait object */
extern uint64_t want_mr_mode;	/* the hints' mr_mode (default 0) */

struct fi_info *rdm_hints(uint64_t caps);
/* An endpoint on the i-th address (-s, -d, -s, ...); NULL and a failed
 * check if it cannot be opened. */
struct node *node_open(int i, uint64_t caps, uint64_t cq_flags);
/* n's endpoint (closing the one it has) on its domain, AV and CQ (bound
 * with FI_TRANSMIT | FI_RECV | cq_flags; FI_RECV alone if n->tx_cq is
 * set, which gets FI_TRANSMIT), with counters tx (FI_SEND) and
 * rx (FI_RECV) if not NULL; enabled, its name in n->name.  0 or -FI_E*. */
int node_ep_open(struct node *n, uint64_t cq_flags, struct fid_cntr *tx,
		 struct fid_cntr *rx);
/* The same with nc counters c[i] bound with flags[i] (NULL ones skipped). */
int node_ep_open_bind(struct node *n, uint64_t cq_flags, struct fid_cntr **c,
		      const uint64_t *flags, int nc);
void node_close(struct node *n);
/* Register len bytes at buf on n's domain with access (FI_REMOTE_*),
 * bound to n's endpoint and enabled where mr_mode has FI_MR_ENDPOINT.
 * 0 or -FI_E*; *mr NULL on failure. */
int node_mr_reg(struct node *n, void *buf, size_t len, uint64_t access,
		struct fid_mr **mr);
void close_all(void);
/* Every node inserts every node's name, in the same order. */
int insert_all(struct node **ns, int count);
void poll_all(void);
long now_ms(void);
/* The next completion of n, progressing every node; -1 on timeout. */
int wait_comp(struct node *n, struct comp *out, int timeout_ms);
/* The same, reading n's CQ alone. */
int wait_comp_alone(struct node *n, struct comp *out, int timeout_ms);
/* Progress everyone for ms; returns completions n has waiting. */
int idle(struct node *n, int ms);
uint8_t *xbuf(size_t len);

/* fi_trecvmsg of tag (ignore 0, any source) with flags (FI_PEEK,
 * FI_CLAIM, FI_DISCARD...) into buf, retried while -FI_EAGAIN. */
ssize_t trecv_flags(struct node *n, uint64_t tag, uint64_t flags,
		    struct fi_context *ctx, void *buf, size_t len);

/* Post, retrying while the provider says -FI_EAGAIN. */
#define POST(call) ({ ssize_t _r; long _end = now_ms() + WAIT_MS;	\
	while ((_r = (call)) == -FI_EAGAIN && now_ms() < _end)		\
		poll_all();						\
	_r; })

/* A second process: this program run with IBFT_RDM_CHILD=role. */
struct child {
	pid_t pid;
	int to, from;	/* pipes */
};
extern char **ibft_argv;	/* main's argv, to run again */
int spawn(struct child *ch, const char *role);
int xwrite(int fd, const void *p, size_t len);
int xread(int fd, void *p, size_t len);
/* Exchange endpoint names over the pipes: ours out, the peer's in. */
int swap_names(struct node *n, int in, int out, uint8_t *peer, size_t *plen);

/* ibft_rdm.c: send len bytes from a to b, checking data, tag and source
 * (to_b: b in a's AV; from_a: a in b's). */
int pingpong_one(struct node *a, fi_addr_t to_b, struct node *b,
		 fi_addr_t from_a, size_t len, int tagged, uint8_t *sbuf,
		 uint8_t *rbuf, unsigned seed);

/* ibft_rdm_cancel.c: fi_cancel, and synchronous sends as MPI's MTL
 * builds them. */
void test_cancel(void);
void test_ssend(void);
/* ibft_rdm_args.c: arguments no provider may trust. */
void test_iov_wrap(void);
void test_stale_claim(void);

/* ibft_rdm_procs.c: tests with threads or other processes, and the roles
 * the child processes play. */
void test_threads(void);
void test_simultaneous(void);
void test_dead_peer(void);
void test_shared_av(void);
int simul_side(int in, int out, int idx);
void victim_side(int in, int out);
int shared_av_child(void);
void test_receive_failure(void);
int big_eager_side(int in, int out);
/* ibft_rdm_share.c: one greedy peer does not starve the others. */
void test_fair_share(void);
void test_away_peer(void);
/* ibft_rdm_load.c: many endpoints, bursts, an unexpected backlog. */
void test_many(int count);
void test_burst(void);
void test_unexpected_backlog(void);
void test_unread_send_cq(void);
/* ibft_rdm_wait.c: fi_cq_sread, poll sets, automatic progress. */
void test_sread(void);
void test_poll(void);
void test_auto_progress(void);
/* ibft_rdm_links.c: links cut, and messages just before a close. */
void test_link_down(void);
void test_link_down_connect(void);
void test_link_down_stale_rts(void);
void test_messages_before_close(void);

#endif
