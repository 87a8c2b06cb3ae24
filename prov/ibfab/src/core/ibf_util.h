/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Small helpers that providers inside libfabric take from its util code,
 * which an external provider cannot use.  Written once, here.
 */
#ifndef IBF_UTIL_H
#define IBF_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>

#ifndef container_of
#define container_of(ptr, type, field) \
	((type *)((char *)(ptr) - offsetof(type, field)))
#endif

#define IBF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define IBF_MAX(a, b) ((a) > (b) ? (a) : (b))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/*
 * A data-path function defined in one file and called from others,
 * written into each caller by link-time optimization (the library is
 * built with -flto and hidden symbols, so its body cannot be replaced at
 * link time).  Without LTO it is an ordinary call.  For small functions
 * on every message only: fabtests/run-instr shows what each saves.
 */
#define IBF_INLINE_HOT __attribute__((always_inline)) inline

/*
 * The bytes of an application's iov[0..count) into *len: 0, or -1 when
 * the lengths add up past SIZE_MAX (a wrapped sum would pass every size
 * check and then copy the full lengths).  Every sum of application
 * lengths goes through here.
 */
static inline int ibf_iov_sum(const struct iovec *iov, size_t count, size_t *len)
{
	size_t i, sum = 0;

	for (i = 0; i < count; i++) {
		if (unlikely(iov[i].iov_len > SIZE_MAX - sum))
			return -1;
		sum += iov[i].iov_len;
	}
	*len = sum;
	return 0;
}

static inline int ibf_ref_get(int *ref)
{
	return __atomic_add_fetch(ref, 1, __ATOMIC_RELAXED);
}

static inline int ibf_ref_put(int *ref)
{
	return __atomic_sub_fetch(ref, 1, __ATOMIC_RELEASE);
}

static inline int ibf_ref_read(int *ref)
{
	return __atomic_load_n(ref, __ATOMIC_ACQUIRE);
}

/* Timeouts in milliseconds against CLOCK_MONOTONIC; negative: forever. */
struct timespec;
void ibf_deadline(struct timespec *deadline, int timeout_ms);
int ibf_ms_left(const struct timespec *deadline);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ibf_now_ns(void);

/*
 * A wait object: an epoll fd over a source fd (a completion or event
 * channel) and an eventfd the provider itself can raise.  The epoll fd is
 * what fi_control(FI_GETWAIT) hands out.
 */
struct ibf_waitfd {
	int epoll_fd;
	int event_fd;
};
int ibf_waitfd_open(struct ibf_waitfd *w, int source_fd);
void ibf_waitfd_close(struct ibf_waitfd *w);
/* Wake on one more fd (made non-blocking), or no longer. */
int ibf_waitfd_watch(struct ibf_waitfd *w, int fd);
void ibf_waitfd_unwatch(struct ibf_waitfd *w, int fd);
int ibf_waitfd_raise(struct ibf_waitfd *w);
/* Lower the eventfd; returns whether it was raised. */
int ibf_waitfd_lower(struct ibf_waitfd *w);
/* epoll_wait on it: > 0 when something is ready, 0 on timeout, or -errno. */
int ibf_waitfd_wait(struct ibf_waitfd *w, int timeout_ms);
/*
 * fi_control of a CQ, EQ or counter whose wait object is w, if it has one
 * (has): FI_GETWAIT hands out w's epoll fd (-FI_ENODATA without one),
 * FI_GETWAITOBJ says FI_WAIT_FD or FI_WAIT_NONE; a NULL arg is
 * -FI_EINVAL, any other command -FI_ENOSYS.
 */
int ibf_waitfd_control(const struct ibf_waitfd *w, int has, int command,
		       void *arg);

/* A size_t option for fi_getopt: -FI_ETOOSMALL (and the size) if it
 * does not fit. */
int ibf_getopt_size(void *optval, size_t *optlen, size_t value);

/* FI_GETOPSFLAG / FI_SETOPSFLAG on an endpoint's tx and rx op flags. */
int ibf_ep_opsflag(int command, uint64_t *flags, uint64_t *tx, uint64_t *rx);

/* Set O_NONBLOCK; returns 0 or -FI_E*. */
int ibf_fd_set_nonblock(int fd);

/* Does the sorted-bits set "want" fit in "have"? */
static inline int ibf_bits_subset(uint64_t want, uint64_t have)
{
	return (want & ~have) == 0;
}

/* Members of fi_ops that an object does not support: -FI_ENOSYS. */
struct fid;
/* The first and last w bytes of s (n >= w, w 4 or 8) to d: n bytes when
 * n <= 2w, in two loads and two stores that may overlap. */
static inline void ibf_copy_ends(uint8_t *d, const uint8_t *s, size_t n,
				 size_t w)
{
	uint64_t a, b;

	memcpy(&a, s, w);
	memcpy(&b, s + n - w, w);
	memcpy(d, &a, w);
	memcpy(d + n - w, &b, w);
}

/*
 * Copy n bytes: up to 16 (a small message's payload, the size most
 * messages of an MPI ping-pong have) without a call; more through
 * memcpy.  The call and memcpy's own dispatch on the size cost more than
 * the copy for 8 bytes.
 */
static inline void ibf_copy(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	if (n > 16) {
		memcpy(d, s, n);
	} else if (n >= 8) {
		ibf_copy_ends(d, s, n, 8);
	} else if (n >= 4) {
		ibf_copy_ends(d, s, n, 4);
	} else {
		while (n--)
			*d++ = *s++;
	}
}

/* Scatter len bytes of src into iov[0..count); returns how many fitted
 * (the rest is the receive's overflow). */
size_t ibf_copy_to_iov_any(const struct iovec *iov, size_t count,
			   const uint8_t *src, size_t len);
static inline size_t ibf_copy_to_iov(const struct iovec *iov, size_t count,
				     const uint8_t *src, size_t len)
{
	size_t n;

	if (count != 1)		/* several, or none */
		return ibf_copy_to_iov_any(iov, count, src, len);
	n = IBF_MIN(iov[0].iov_len, len);
	ibf_copy(iov[0].iov_base, src, n);
	return n;
}

/*
 * An enum value for a log line, by name: "FI_SUM", or "Unknown (99)" for a
 * value libfabric has no name for.  type is fi_tostr's (enum fi_type), or
 * IBF_TYPE_WAIT_OBJ, which fi_tostr does not know.  Thread-safe: the
 * name goes in buf.
 */
#define IBF_TYPE_WAIT_OBJ (-1)
#define IBF_ENUM_STR 48
const char *ibf_enum_str(char *buf, size_t len, int type, int value);

/*
 * A state machine's two tables (RDM ops, RDM connections, FI_EP_MSG
 * endpoints): names[state] for the logs ("?" for a state out of range or
 * unnamed), and moves[from], a bit per state from may go to.  A move the
 * table refuses is warned about, as a bug, naming what moved ("an op").
 */
const char *ibf_state_name(const char *const *names, int nstates, int state);
int ibf_state_move_ok(const uint32_t *moves, const char *const *names,
		      int nstates, int from, int to, const char *what);

int ibf_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int ibf_no_control(struct fid *fid, int command, void *arg);
int ibf_no_ops_open(struct fid *fid, const char *name, uint64_t flags,
		    void **ops, void *context);
int ibf_no_tostr(const struct fid *fid, char *buf, size_t len);
int ibf_no_ops_set(struct fid *fid, const char *name, uint64_t flags,
		   void *ops, void *context);

#endif /* IBF_UTIL_H */
