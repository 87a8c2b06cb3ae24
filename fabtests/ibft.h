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

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

struct ibft_opts {
	const char *prov;	/* -p */
	const char *domains;	/* -D: comma-separated domains expected */
	const char *src;	/* -s: local address */
	const char *dst;	/* -d: peer address */
	const char *port;	/* -P */
	int iters;		/* -n */
	int server;		/* no -d */
};

extern struct ibft_opts ibft_opts;
extern int ibft_failed;

/* Parse the common options; exits on a bad one. */
void ibft_parse(int argc, char **argv, const char *usage_extra);

/* Record one check. */
int ibft_check(int ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define IBFT_CHECK(cond, name, ...) ibft_check(!!(cond), name, __VA_ARGS__)
/* A call that must return the given value. */
#define IBFT_EXPECT(call, want, name) \
	ibft_expect((long)(call), (long)(want), name, #call)
int ibft_expect(long got, long want, const char *name, const char *call);

/*
 * Checks a provider is known to fail against the man pages: reported as
 * "skip - NAME: why" instead of run, when -p is that provider.
 */
int ibft_deviates(const char *prov, const char *name, const char *why);

/* Hints for a MSG endpoint with local registration, for provider -p. */
struct fi_info *ibft_msg_hints(void);

/* Open file descriptors and resident memory of this process. */
int ibft_count_fds(void);
long ibft_rss_kib(void);

/* Print the closing summary; returns the exit status. */
int ibft_finish(void);

#endif
