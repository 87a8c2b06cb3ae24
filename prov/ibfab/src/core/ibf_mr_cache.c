/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The registration cache and the memory monitor behind it
 * (ibf_mr_cache.h says what and why).
 *
 * One monitor per process: a userfaultfd can watch a range only if no
 * other userfaultfd does, so every cache (one per domain) shares it, and
 * its lock guards every cache.  Nothing that could unmap, remap or discard
 * watched memory may run under that lock, nor in the monitor thread at
 * all (the unmapping thread waits for the monitor to read; even free()
 * can unmap, when glibc trims its heap): the monitor only unlinks the
 * entries an event touches, and an application thread deregisters and
 * frees them at its next call, after releasing the lock.
 *
 * fork(): the monitor is the process's, not its children's.  The fork
 * takes the monitor's lock (so no child inherits it held) and gives it
 * back on both sides; the child then has no monitor: it closes its copy
 * of the parent's userfaultfd (registering through it would watch the
 * parent's memory, and its own unmaps would go unseen) and forgets the
 * parent's caches, whose entries are the parent's registrations, never
 * to be deregistered from the child.  A cache the child opens starts a
 * monitor of its own.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "ibf_mr_cache.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define IBF_MON_EVENTS (UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMAP | \
			UFFD_FEATURE_EVENT_REMOVE)

struct ibf_mr_cache {
	const struct ibf_mr_cache_ops *ops;
	void *ctx;
	size_t max, count;
	uint64_t clock, regs;
	struct ibf_mr_cache_entry *head;	/* live entries */
	struct ibf_mr_cache_entry *grave;	/* dropped, idle: to free */
	struct ibf_mr_cache *next;		/* in the monitor's list */
};

static struct {
	pthread_mutex_t lock;
	int users;
	int uffd, stop_fd;
	pthread_t thread;
	struct ibf_mr_cache *caches;
} ibf_mon = { .lock = PTHREAD_MUTEX_INITIALIZER, .uffd = -1, .stop_fd = -1 };

static pthread_once_t ibf_mon_once = PTHREAD_ONCE_INIT;

static void ibf_mon_fork_prepare(void)
{
	pthread_mutex_lock(&ibf_mon.lock);
}

static void ibf_mon_fork_parent(void)
{
	pthread_mutex_unlock(&ibf_mon.lock);
}

static void ibf_mon_fork_child(void)
{
	if (ibf_mon.uffd >= 0)
		close(ibf_mon.uffd);
	if (ibf_mon.stop_fd >= 0)
		close(ibf_mon.stop_fd);
	ibf_mon.uffd = ibf_mon.stop_fd = -1;
	ibf_mon.users = 0;
	ibf_mon.caches = NULL;	/* the parent's: left alone */
	pthread_mutex_unlock(&ibf_mon.lock);
}

static void ibf_mon_atfork(void)
{
	pthread_atfork(ibf_mon_fork_prepare, ibf_mon_fork_parent,
		       ibf_mon_fork_child);
}

/* ---- entries (monitor lock held unless said) ---- */

static void ibf_mr_cache_unlink(struct ibf_mr_cache *c,
				struct ibf_mr_cache_entry *e)
{
	struct ibf_mr_cache_entry **p;

	for (p = &c->head; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			c->count--;
			return;
		}
	}
}

/* Deregister and free a list of dropped entries (lock not held). */
static void ibf_mr_cache_free_list(struct ibf_mr_cache *c,
				   struct ibf_mr_cache_entry *e)
{
	struct ibf_mr_cache_entry *next;

	for (; e; e = next) {
		next = e->next;
		c->ops->dereg(c->ctx, e->handle);
		free(e);
	}
}

/* Drop every entry of c overlapping [start, end): idle ones onto *dead. */
static void ibf_mr_cache_invalidate(struct ibf_mr_cache *c, uintptr_t start,
				    uintptr_t end,
				    struct ibf_mr_cache_entry **dead)
{
	struct ibf_mr_cache_entry **p = &c->head, *e;

	while ((e = *p)) {
		if (e->start >= end || e->end <= start) {
			p = &e->next;
			continue;
		}
		*p = e->next;
		c->count--;
		e->dead = 1;
		if (!e->refs) {
			e->next = *dead;
			*dead = e;
		}
	}
}

/* ---- the monitor ---- */

/* What an event says is no longer what it was: [start, end). */
static int ibf_mon_range(const struct uffd_msg *m, uintptr_t *start,
			 uintptr_t *end)
{
	switch (m->event) {
	case UFFD_EVENT_UNMAP:
	case UFFD_EVENT_REMOVE:
		*start = m->arg.remove.start;
		*end = m->arg.remove.end;
		return 1;
	case UFFD_EVENT_REMAP:
		*start = m->arg.remap.from;
		*end = m->arg.remap.from + m->arg.remap.len;
		return 1;
	default:
		return 0;	/* no fault is ever armed */
	}
}

/*
 * Read events with the lock held: the thread that unmapped is released
 * by the read, and by then its entries are gone from every cache.
 */
static void *ibf_mon_thread(void *arg)
{
	struct pollfd pfd[2];
	struct ibf_mr_cache *c;
	struct uffd_msg m;
	uintptr_t start, end;

	(void)arg;
	for (;;) {
		pfd[0] = (struct pollfd){ .fd = ibf_mon.uffd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = ibf_mon.stop_fd, .events = POLLIN };
		if (poll(pfd, 2, -1) < 0)
			continue;
		if (pfd[1].revents)
			return NULL;
		pthread_mutex_lock(&ibf_mon.lock);
		while (read(ibf_mon.uffd, &m, sizeof(m)) == sizeof(m)) {
			if (!ibf_mon_range(&m, &start, &end))
				continue;
			for (c = ibf_mon.caches; c; c = c->next)
				ibf_mr_cache_invalidate(c, start, end, &c->grave);
		}
		pthread_mutex_unlock(&ibf_mon.lock);
	}
}

/* The first cache starts the monitor (lock held). */
static int ibf_mon_start(void)
{
	struct uffdio_api api = { .api = UFFD_API, .features = IBF_MON_EVENTS };
	int fd;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -FI_ENOSYS;
	if (ioctl(fd, UFFDIO_API, &api) ||
	    (api.features & IBF_MON_EVENTS) != IBF_MON_EVENTS) {
		close(fd);
		return -FI_ENOSYS;
	}
	ibf_mon.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ibf_mon.stop_fd < 0) {
		close(fd);
		return -FI_ENOMEM;
	}
	ibf_mon.uffd = fd;
	if (pthread_create(&ibf_mon.thread, NULL, ibf_mon_thread, NULL)) {
		close(ibf_mon.stop_fd);
		close(fd);
		ibf_mon.uffd = ibf_mon.stop_fd = -1;
		return -FI_ENOMEM;
	}
	return 0;
}

/* The last cache stops it (lock not held: the thread takes it). */
static void ibf_mon_stop(void)
{
	uint64_t one = 1;

	if (write(ibf_mon.stop_fd, &one, sizeof(one)) != sizeof(one))
		return;
	pthread_join(ibf_mon.thread, NULL);
	close(ibf_mon.stop_fd);
	close(ibf_mon.uffd);
	ibf_mon.uffd = ibf_mon.stop_fd = -1;
}

/* Watch [start, end) (page aligned outward): 0 if the kernel will tell. */
static int ibf_mon_watch(uintptr_t start, uintptr_t end)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	struct uffdio_register r = { .mode = UFFDIO_REGISTER_MODE_WP };

	r.range.start = start & ~(page - 1);
	r.range.len = ((end + page - 1) & ~(page - 1)) - r.range.start;
	return ioctl(ibf_mon.uffd, UFFDIO_REGISTER, &r) ? -1 : 0;
}

/* Whether a live entry of any cache overlaps [start, end) (lock held). */
static int ibf_mon_watched(uintptr_t start, uintptr_t end)
{
	struct ibf_mr_cache_entry *e;
	struct ibf_mr_cache *c;

	for (c = ibf_mon.caches; c; c = c->next)
		for (e = c->head; e; e = e->next)
			if (e->start < end && e->end > start)
				return 1;
	return 0;
}

/*
 * Stop watching the pages of entries dropped while their memory is still
 * mapped (evicted, or their cache closed), unless another entry needs
 * them: a watched range splits its mapping (toward vm.max_map_count) and
 * keeps other userfaultfd users off those pages.  Lock held.
 */
static void ibf_mon_unwatch_list(const struct ibf_mr_cache_entry *e)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), s, t;
	struct uffdio_range r;

	for (; e; e = e->next) {
		s = e->start & ~(page - 1);
		t = (e->end + page - 1) & ~(page - 1);
		if (ibf_mon.uffd < 0 || ibf_mon_watched(s, t))
			continue;
		r.start = s;
		r.len = t - s;
		ioctl(ibf_mon.uffd, UFFDIO_UNREGISTER, &r);	/* gone: fine */
	}
}

/* ---- the cache ---- */

int ibf_mr_cache_open(struct ibf_mr_cache **cache,
		      const struct ibf_mr_cache_ops *ops, void *ctx, size_t max)
{
	struct ibf_mr_cache *c = calloc(1, sizeof(*c));
	int ret = 0;

	if (!c)
		return -FI_ENOMEM;
	c->ops = ops;
	c->ctx = ctx;
	c->max = max ? max : 1;
	pthread_once(&ibf_mon_once, ibf_mon_atfork);
	pthread_mutex_lock(&ibf_mon.lock);
	if (!ibf_mon.users)
		ret = ibf_mon_start();
	if (!ret) {
		ibf_mon.users++;
		c->next = ibf_mon.caches;
		ibf_mon.caches = c;
	}
	pthread_mutex_unlock(&ibf_mon.lock);
	if (ret) {
		free(c);
		return ret;
	}
	*cache = c;
	return 0;
}

void ibf_mr_cache_close(struct ibf_mr_cache *c)
{
	struct ibf_mr_cache **p;
	struct ibf_mr_cache_entry *dead;
	int last = 0, ours = 0;

	pthread_mutex_lock(&ibf_mon.lock);
	for (p = &ibf_mon.caches; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			ours = 1;
			break;
		}
	}
	if (!ours) {
		/* The parent's cache, closed in a forked child: its
		 * registrations are the parent's to let go. */
		pthread_mutex_unlock(&ibf_mon.lock);
		free(c);
		return;
	}
	dead = c->grave;
	c->grave = NULL;
	ibf_mr_cache_invalidate(c, 0, UINTPTR_MAX, &dead);
	ibf_mon_unwatch_list(dead);
	last = --ibf_mon.users == 0;
	pthread_mutex_unlock(&ibf_mon.lock);
	ibf_mr_cache_free_list(c, dead);
	if (last)
		ibf_mon_stop();
	free(c);
}

/* Make room: idle entries, least recently used first (lock held). */
static void ibf_mr_cache_evict(struct ibf_mr_cache *c,
			       struct ibf_mr_cache_entry **dead)
{
	struct ibf_mr_cache_entry *e, *lru;

	while (c->count >= c->max) {
		lru = NULL;
		for (e = c->head; e; e = e->next)
			if (!e->refs && (!lru || e->used < lru->used))
				lru = e;
		if (!lru)
			return;		/* all in use: grow past max */
		ibf_mr_cache_unlink(c, lru);
		lru->next = *dead;
		*dead = lru;
	}
}

/* A live entry covering [start, end) with access, taken (lock held), or
 * NULL. */
static struct ibf_mr_cache_entry *
ibf_mr_cache_hit(struct ibf_mr_cache *c, uintptr_t start, uintptr_t end,
		 int access)
{
	struct ibf_mr_cache_entry *e;

	for (e = c->head; e; e = e->next) {
		if (e->handle && e->start <= start && e->end >= end &&
		    (e->access & access) == access) {
			e->refs++;
			e->used = ++c->clock;
			return e;
		}
	}
	return NULL;
}

/*
 * The registration itself is made without the lock: an munmap() elsewhere
 * waits for the monitor, which waits for the lock, and a registration can
 * take long.  The entry goes in first, pending (no handle: no lookup takes
 * it), so that an unmap during the registration marks it dead; then it is
 * not used, and the caller registers for the operation alone.
 */
struct ibf_mr_cache_entry *ibf_mr_cache_get(struct ibf_mr_cache *c,
					    const void *addr, size_t len,
					    int access, int *uncacheable)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	struct ibf_mr_cache_entry *e, *dead = NULL, *evicted = NULL;
	struct ibf_mr_cache_entry *fresh = NULL;
	void *handle = NULL;
	uint32_t lkey;

	*uncacheable = 0;
	pthread_mutex_lock(&ibf_mon.lock);
	dead = c->grave;	/* freed below, without the lock */
	c->grave = NULL;
	if ((e = ibf_mr_cache_hit(c, start, end, access)))
		goto out;	/* a hit allocates nothing */
	/* A miss: the new entry is allocated without the lock (malloc may
	 * unmap), then the lookup is made again, as another thread may have
	 * registered the range meanwhile. */
	pthread_mutex_unlock(&ibf_mon.lock);
	fresh = malloc(sizeof(*fresh));
	pthread_mutex_lock(&ibf_mon.lock);
	if ((e = ibf_mr_cache_hit(c, start, end, access)))
		goto out;
	if (!fresh) {
		errno = ENOMEM;
		goto out;
	}
	/* Watched first: an unmap from here on finds the entry. */
	if (ibf_mon_watch(start, end)) {
		*uncacheable = 1;
		goto out;
	}
	ibf_mr_cache_evict(c, &evicted);
	*fresh = (struct ibf_mr_cache_entry){ .start = start, .end = end,
		.access = access, .refs = 1, .used = ++c->clock, .next = c->head };
	c->head = fresh;
	c->count++;
	ibf_mon_unwatch_list(evicted);	/* not what the new entry needs */
	e = fresh;
	fresh = NULL;
	pthread_mutex_unlock(&ibf_mon.lock);

	handle = c->ops->reg(c->ctx, (void *)addr, len, access, &lkey);

	pthread_mutex_lock(&ibf_mon.lock);
	if (!handle || e->dead) {
		/* Failed, or the memory changed while it was registered:
		 * not cached (deregistered below, without the lock). */
		if (!e->dead)
			ibf_mr_cache_unlink(c, e);
		fresh = e;
		e = NULL;
		*uncacheable = !!handle;
		goto out;
	}
	e->handle = handle;
	e->lkey = lkey;
	handle = NULL;
	c->regs++;
out:
	pthread_mutex_unlock(&ibf_mon.lock);
	free(fresh);
	if (handle)
		c->ops->dereg(c->ctx, handle);
	ibf_mr_cache_free_list(c, dead);
	ibf_mr_cache_free_list(c, evicted);
	return e;
}

void ibf_mr_cache_put(struct ibf_mr_cache *c, struct ibf_mr_cache_entry *e)
{
	struct ibf_mr_cache_entry *dead;

	pthread_mutex_lock(&ibf_mon.lock);
	dead = c->grave;
	c->grave = NULL;
	if (--e->refs == 0 && e->dead) {
		e->next = dead;
		dead = e;
	}
	pthread_mutex_unlock(&ibf_mon.lock);
	ibf_mr_cache_free_list(c, dead);
}

size_t ibf_mr_cache_count(struct ibf_mr_cache *c)
{
	size_t n;

	pthread_mutex_lock(&ibf_mon.lock);
	n = c->count;
	pthread_mutex_unlock(&ibf_mon.lock);
	return n;
}

uint64_t ibf_mr_cache_regs(struct ibf_mr_cache *c)
{
	uint64_t n;

	pthread_mutex_lock(&ibf_mon.lock);
	n = c->regs;
	pthread_mutex_unlock(&ibf_mon.lock);
	return n;
}
