/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Helpers libfabric keeps in its util code, which we cannot link to. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ibf.h"

int ibf_fd_set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int ibf_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	return -FI_ENOSYS;
}

int ibf_no_control(struct fid *fid, int command, void *arg)
{
	return -FI_ENOSYS;
}

int ibf_no_ops_open(struct fid *fid, const char *name, uint64_t flags,
		    void **ops, void *context)
{
	return -FI_ENOSYS;
}

int ibf_no_tostr(const struct fid *fid, char *buf, size_t len)
{
	return -FI_ENOSYS;
}

int ibf_no_ops_set(struct fid *fid, const char *name, uint64_t flags,
		   void *ops, void *context)
{
	return -FI_ENOSYS;
}

/* Wait objects ibfab has: none, or an fd.  Others exist but are not ours. */
int ibf_check_wait_obj(enum fi_wait_obj wait_obj)
{
	switch (wait_obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
		return 0;
	case FI_WAIT_SET:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_YIELD:
	case FI_WAIT_POLLFD:
		return -FI_ENOSYS;
	default:
		return -FI_EINVAL;
	}
}

void ibf_deadline(struct timespec *deadline, int timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, deadline);
	if (timeout_ms < 0)
		return;
	deadline->tv_sec += timeout_ms / 1000;
	deadline->tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (deadline->tv_nsec >= 1000000000) {
		deadline->tv_sec++;
		deadline->tv_nsec -= 1000000000;
	}
}

uint64_t ibf_now_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

int ibf_ms_left(const struct timespec *deadline)
{
	struct timespec now;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (deadline->tv_sec - now.tv_sec) * 1000 +
	     (deadline->tv_nsec - now.tv_nsec + 999999) / 1000000;
	return ms > 0 ? (int)ms : 0;
}

int ibf_waitfd_open(struct ibf_waitfd *w, int source_fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ret;

	w->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (w->event_fd < 0 || w->epoll_fd < 0)
		goto err;
	/* source_fd -1: none yet (ibf_waitfd_watch adds them). */
	if (source_fd >= 0 && ibf_fd_set_nonblock(source_fd))
		goto err;	/* errno says why, as for the calls below */
	if ((source_fd >= 0 &&
	     epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, source_fd, &ev)) ||
	    epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->event_fd, &ev))
		goto err;
	return 0;
err:
	ret = -errno;
	ibf_waitfd_close(w);
	return ret ? ret : -FI_EOTHER;
}

int ibf_waitfd_watch(struct ibf_waitfd *w, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ret = ibf_fd_set_nonblock(fd);

	if (ret)
		return ret;
	return epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

void ibf_waitfd_unwatch(struct ibf_waitfd *w, int fd)
{
	epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
}

void ibf_waitfd_close(struct ibf_waitfd *w)
{
	if (w->epoll_fd >= 0)
		close(w->epoll_fd);
	if (w->event_fd >= 0)
		close(w->event_fd);
	w->epoll_fd = w->event_fd = -1;
}

int ibf_waitfd_raise(struct ibf_waitfd *w)
{
	uint64_t one = 1;

	return write(w->event_fd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

int ibf_waitfd_lower(struct ibf_waitfd *w)
{
	uint64_t v;

	return read(w->event_fd, &v, sizeof(v)) == sizeof(v);
}

int ibf_waitfd_wait(struct ibf_waitfd *w, int timeout_ms)
{
	struct epoll_event ev[2];
	int n = epoll_wait(w->epoll_fd, ev, 2, timeout_ms);

	return n < 0 ? (errno == EINTR ? 0 : -errno) : n;
}

int ibf_waitfd_control(const struct ibf_waitfd *w, int has, int command,
		       void *arg)
{
	if (command != FI_GETWAIT && command != FI_GETWAITOBJ)
		return -FI_ENOSYS;
	if (!arg) {
		IBF_WARN(FI_LOG_CORE, "fi_control(%s) with no place to put "
			 "the answer\n", command == FI_GETWAIT ? "FI_GETWAIT" :
			 "FI_GETWAITOBJ");
		return -FI_EINVAL;
	}
	if (command == FI_GETWAITOBJ) {
		*(enum fi_wait_obj *)arg = has ? FI_WAIT_FD : FI_WAIT_NONE;
		return 0;
	}
	if (!has)
		return -FI_ENODATA;	/* opened with FI_WAIT_NONE */
	*(int *)arg = w->epoll_fd;
	return 0;
}

int ibf_getopt_size(void *optval, size_t *optlen, size_t value)
{
	if (!optlen)
		return -FI_EINVAL;
	if (!optval || *optlen < sizeof(size_t)) {
		*optlen = sizeof(size_t);
		return -FI_ETOOSMALL;
	}
	*(size_t *)optval = value;
	*optlen = sizeof(size_t);
	return 0;
}

int ibf_ep_opsflag(int command, uint64_t *flags, uint64_t *tx, uint64_t *rx)
{
	uint64_t *which;

	if (!flags)
		return -FI_EINVAL;
	if (*flags & FI_TRANSMIT)
		which = tx;
	else if (*flags & FI_RECV)
		which = rx;
	else
		return -FI_EINVAL;
	if (command == FI_GETOPSFLAG)
		*flags = *which;
	else
		*which = *flags & ~(FI_TRANSMIT | FI_RECV);
	return 0;
}

const char *ibf_state_name(const char *const *names, int nstates, int state)
{
	return (unsigned)state < (unsigned)nstates && names[state] ?
	       names[state] : "?";
}

int ibf_state_move_ok(const uint32_t *moves, const char *const *names,
		      int nstates, int from, int to, const char *what)
{
	if ((unsigned)from < (unsigned)nstates && (unsigned)to < (unsigned)nstates &&
	    (moves[from] & (1u << to)))
		return 1;
	IBF_WARN(FI_LOG_CORE, "%s went from %s to %s, which its life does not "
		 "allow: a bug in ibfab, please report it\n", what,
		 ibf_state_name(names, nstates, from),
		 ibf_state_name(names, nstates, to));
	return 0;
}

const char *ibf_enum_str(char *buf, size_t len, int type, int value)
{
	static const char *const waits[] = {
		[FI_WAIT_NONE] = "FI_WAIT_NONE", [FI_WAIT_UNSPEC] = "FI_WAIT_UNSPEC",
		[FI_WAIT_SET] = "FI_WAIT_SET", [FI_WAIT_FD] = "FI_WAIT_FD",
		[FI_WAIT_MUTEX_COND] = "FI_WAIT_MUTEX_COND",
		[FI_WAIT_YIELD] = "FI_WAIT_YIELD", [FI_WAIT_POLLFD] = "FI_WAIT_POLLFD",
	};
	const char *name = NULL;

	if (type == IBF_TYPE_WAIT_OBJ) {
		if (value >= 0 && (size_t)value < sizeof(waits) / sizeof(waits[0]))
			name = waits[value];
	} else if (fi_tostr_r(buf, len, &value, (enum fi_type)type) &&
		   strcmp(buf, "Unknown") && buf[0]) {
		return buf;
	}
	if (name)
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "Unknown (%d)", value);
	return buf;
}

size_t ibf_copy_to_iov_any(const struct iovec *iov, size_t count,
			   const uint8_t *src, size_t len)
{
	size_t i, n, done = 0;

	for (i = 0; i < count && done < len; i++) {
		n = IBF_MIN(iov[i].iov_len, len - done);
		memcpy(iov[i].iov_base, src + done, n);
		done += n;
	}
	return done;
}
