/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Shared helpers of the ibfab integration programs.  They use libfabric's
 * public API only and take the provider with -p, so each expectation can
 * be checked against ibfab and against libfabric's own providers.
 *
 * Output is one line per check, "ok - NAME", "not ok - NAME: why" or
 * "skip - NAME: why";
 * run-suite counts them.  A program exits 1 if any check failed.
 */
#ifndef IBFT_H
#define IBFT_H

#include <stdint.h>
#include <stdio.h>

#define IBFT_MIN(a, b) ((a) < (b) ? (a) : (b))

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

/* The libfabric API version the programs ask for. */
#define IBFT_VERSION FI_VERSION(1, 17)

struct ibft_opts {
	const char *prov;	/* -p */
	const char *domains;	/* -D: comma-separated domains expected */
	const char *src;	/* -s: local address */
	const char *dst;	/* -d: peer address */
	const char *port;	/* -P */
	int iters;		/* -n */
	const char *test;	/* -t: which test, for programs with several */
	size_t max_size;	/* -m */
	int wait_fd;		/* -w: block on fds instead of spinning */
	int server;		/* no -d */
};

extern struct ibft_opts ibft_opts;
extern int ibft_failed;

/* Parse the common options; exits on a bad one. */
void ibft_parse(int argc, char **argv, const char *usage_extra);

/* Record one check. */
int ibft_check(int ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Its value is the condition's, in a form a static analyzer follows into
 * the code after a failed check (ibft_check returns ok, in another file). */
#define IBFT_CHECK(cond, name, ...) ({					\
	int ibft_ok_ = !!(cond);					\
	ibft_check(ibft_ok_, name, __VA_ARGS__);			\
	ibft_ok_;							\
})
/* A call that must return the given value. */
#define IBFT_EXPECT(call, want, name) ({				\
	long ibft_got_ = (long)(call), ibft_want_ = (long)(want);	\
	ibft_expect(ibft_got_, ibft_want_, name, #call);		\
	ibft_got_ == ibft_want_;					\
})
int ibft_expect(long got, long want, const char *name, const char *call);

/* Close a libfabric object if it is open (teardown after a failed step
 * meets some not opened yet), and forget it. */
#define IBFT_CLOSE(obj)					\
	do {						\
		if (obj) {				\
			fi_close(&(obj)->fid);		\
			(obj) = NULL;			\
		}					\
	} while (0)

/*
 * Checks a provider is known to fail against the man pages: reported as
 * "skip - NAME: why" instead of run, when -p is that provider.
 */
int ibft_deviates(const char *prov, const char *name, const char *why);

/* Hints for a MSG endpoint with local registration, for provider -p. */
struct fi_info *ibft_msg_hints(void);

/* An EQ's connection event with room for 256 bytes of connection data
 * behind it (in e.data).  A union: fi_eq_cm_entry ends in a flexible
 * array, which may end a struct only, not sit before another member. */
union ibft_cm_entry {
	struct fi_eq_cm_entry e;
	uint8_t room[sizeof(struct fi_eq_cm_entry) + 256];
};

/* A connected FI_EP_MSG endpoint and what it needs. */
struct ibft_conn {
	struct fi_info *info;	/* the endpoint's */
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_cq *cq;	/* one CQ for both directions */
	struct fid_pep *pep;	/* server only */
	struct fid_ep *ep;
	struct fid_ep *srx;	/* shared receive context, with shared_rx */
	/* With cntrs: sends and writes, reads, receives. */
	struct fid_cntr *tx_cntr, *rd_cntr, *rx_cntr;
	int cq_fd;		/* with wait_fd */
	uint8_t cm_data[64];	/* private data the peer sent */
	size_t cm_data_len;
};

struct ibft_conn_opts {
	int wait_fd;		/* CQ with FI_WAIT_FD, else FI_WAIT_NONE */
	uint64_t cq_bind_flags;	/* extra: FI_SELECTIVE_COMPLETION */
	size_t tx_size, rx_size;	/* 0: the provider's */
	size_t cq_size;		/* 0: the provider's */
	int shared_rx;		/* receives through a shared receive context */
	int tagged;		/* FI_TAGGED, and a CQ of FI_CQ_FORMAT_TAGGED */
	int cntrs;		/* bind counters (FI_WAIT_UNSPEC) too */
	uint64_t caps;		/* more caps to ask (FI_ATOMIC) */
	int no_cq;		/* with cntrs: bind no CQ at all */
	const void *cm_data;	/* sent with connect / accept */
	size_t cm_data_len;
	enum fi_threading threading;	/* 0 (FI_THREAD_UNSPEC): the provider's */
};

/* Hints with the -s/-d addresses in place. */
struct fi_info *ibft_msg_hints_addr(void);
/* Server (no -d): listen on -s, accept one.  Client: connect to -d. */
int ibft_connect(struct ibft_conn *c, const struct ibft_conn_opts *o);
/* Server side in two steps, to reject or to accept: */
int ibft_listen(struct ibft_conn *c, const struct ibft_conn_opts *o);
int ibft_wait_connreq(struct ibft_conn *c, struct fi_info **req);
int ibft_accept(struct ibft_conn *c, struct fi_info *req,
		const struct ibft_conn_opts *o);
int ibft_open_active(struct ibft_conn *c, const struct ibft_conn_opts *o,
		     struct fi_info *info);
/* Wait for one EQ event; returns it (or -FI_E*), copying into buf, and
 * leaves the bytes fi_eq_sread returned in ibft_eq_last_len. */
extern ssize_t ibft_eq_last_len;
int ibft_eq_wait(struct fid_eq *eq, void *buf, size_t len, int timeout_ms,
		 struct fi_eq_err_entry *err);
void ibft_close(struct ibft_conn *c);

/* Read n completions (spinning, or blocking through the fd with epoll). */
int ibft_cq_wait(struct ibft_conn *c, struct fi_cq_data_entry *e, int n,
		 int use_fd, int timeout_ms);
/* The error completion behind -FI_EAVAIL. */
int ibft_cq_wait_err(struct ibft_conn *c, struct fi_cq_err_entry *err,
		     int timeout_ms);

/* A registered buffer. */
struct ibft_buf {
	uint8_t *ptr;
	size_t len;
	struct fid_mr *mr;
	void *desc;
	uint64_t key;
};
int ibft_buf_alloc(struct ibft_conn *c, struct ibft_buf *b, size_t len,
		   uint64_t access);
void ibft_buf_free(struct ibft_buf *b);
void ibft_fill(uint8_t *p, size_t len, unsigned seed);
int ibft_verify(const uint8_t *p, size_t len, unsigned seed);

/* Small control messages over the connection, for syncing two sides. */
int ibft_ctl_send(struct ibft_conn *c, struct ibft_buf *b, const void *msg,
		  size_t len);
int ibft_ctl_recv(struct ibft_conn *c, struct ibft_buf *b, void *msg,
		  size_t len);

/* Open file descriptors and resident memory of this process. */
int ibft_count_fds(void);
long ibft_rss_kib(void);

/* Monotonic time in microseconds; a qsort comparison of doubles. */
double ibft_now_us(void);
int ibft_cmp_double(const void *a, const void *b);

/* Print the closing summary; returns the exit status. */
int ibft_finish(void);

#endif
