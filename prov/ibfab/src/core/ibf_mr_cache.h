/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The registration cache (ibf_mr_cache.c): registrations ibfab makes of
 * the application's buffers for its own use, kept for the next operation
 * on the same memory, and dropped the moment that memory stops being what
 * was registered.
 *
 * Why it can go wrong: a registration pins the physical pages behind a
 * range of addresses.  If the application unmaps the range (free() of a
 * large block does), remaps it, or discards its pages (madvise
 * MADV_DONTNEED), and later gets new memory at the same address, a cached
 * registration still names the old pages: the device reads stale data or
 * writes where no one looks (silent corruption, ofiwg/libfabric #5909,
 * #6474).  Memory freed into malloc's heap and reused keeps its pages, so
 * its registration stays right.
 *
 * How it is kept right: the kernel tells.  Every cached range is registered
 * with a userfaultfd (write-protect mode, never armed: no fault is ever
 * taken) asking for its unmap, remap and remove events.  The thread that
 * unmaps is held by the kernel until the event is read; a monitor thread
 * reads events with the cache's lock held and drops the entries they touch
 * before letting go, so a lookup that follows an munmap() can never find
 * the old registration.  Memory userfaultfd cannot watch (file-backed
 * mappings), or a kernel without it, is not cached: it is registered for
 * the operation alone, as without a cache.
 *
 * Only local registrations are cached (the device reading from or writing
 * into the buffer, or binding a memory window over it).  Rights a peer
 * uses (rendezvous sends) are given per operation and taken back at its
 * end, through a memory window on a cached registration (IBV_ACCESS_MW_BIND
 * alone gives a peer nothing) or a registration of the operation's own: a
 * cached remote key would leave a peer able to read the application's
 * memory long after.
 *
 * The registration itself is the caller's (ops), so the unit tests run the
 * cache without a device.  All calls take the cache's lock: this is the
 * slow path of large, unregistered buffers, where the alternative is a
 * registration per operation.
 */
#ifndef IBF_MR_CACHE_H
#define IBF_MR_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct ibf_mr_cache;

struct ibf_mr_cache_ops {
	/* Register [addr, addr + len) with access (IBV_ACCESS_*): a handle
	 * and its lkey, or NULL and errno set. */
	void *(*reg)(void *ctx, void *addr, size_t len, int access,
		     uint32_t *lkey);
	void (*dereg)(void *ctx, void *handle);
};

struct ibf_mr_cache_entry {
	uint32_t lkey;
	void *handle;		/* ops->reg's registration (an ibv_mr) */
	/* the rest is the cache's */
	uintptr_t start, end;	/* registered bytes */
	int access;
	int refs;		/* operations using it */
	int dead;		/* invalidated: freed when refs drop to 0 */
	uint64_t used;		/* last use, for eviction */
	struct ibf_mr_cache_entry *next;
};

/*
 * A cache of at most max entries (least recently used ones idle are
 * evicted).  -FI_ENOSYS if the kernel cannot watch memory (no cache:
 * register per operation), other -FI_E* on failure.
 */
int ibf_mr_cache_open(struct ibf_mr_cache **cache,
		      const struct ibf_mr_cache_ops *ops, void *ctx,
		      size_t max);
/* Every entry deregistered; entries still held by operations are the
 * caller's error (they are dropped all the same). */
void ibf_mr_cache_close(struct ibf_mr_cache *cache);
/*
 * A registration covering [addr, addr + len) with at least access, held
 * until ibf_mr_cache_put: a cached one, or a new one kept in the cache.
 * NULL (errno set) if the memory cannot be registered; *uncacheable set if
 * it can be, but not watched (the caller registers it per operation).
 */
struct ibf_mr_cache_entry *ibf_mr_cache_get(struct ibf_mr_cache *cache,
					    const void *addr, size_t len,
					    int access, int *uncacheable);
void ibf_mr_cache_put(struct ibf_mr_cache *cache,
		      struct ibf_mr_cache_entry *entry);

/* For tests: entries held in the cache, and registrations made so far. */
size_t ibf_mr_cache_count(struct ibf_mr_cache *cache);
uint64_t ibf_mr_cache_regs(struct ibf_mr_cache *cache);

#endif /* IBF_MR_CACHE_H */
