/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Address vectors: a table of RDM endpoint names (sockaddrs).
 *
 * fi_addr is the table index for FI_AV_TABLE and FI_AV_MAP alike (MAP lets
 * the provider choose; an index costs one load on the data path either
 * way).  A removed slot is reused by the next insert, lowest first, as the
 * FI_AV_TABLE rules say.  Inserts are synchronous; an AV opened with
 * FI_EVENT also reports each insert call on its EQ (an error entry per
 * address refused, then FI_AV_COMPLETE with the number inserted).
 *
 * A named AV (FI_SHARED_AV) is kept in POSIX shared memory of a fixed
 * size (attr->count entries, default IBF_AV_SHARED_COUNT), so other
 * processes of the node can open it with FI_READ and use its fi_addrs,
 * which they find at attr->map_addr.  The first opener without FI_READ
 * creates it (O_EXCL); later ones share it, never truncate it, and take
 * turns inserting (flock).  A file that exists is used only if it is
 * this user's, writable by nobody else, and its header, size and counts
 * agree; a count read from it is never trusted past the capacity mapped.
 */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ibf_av.h"

/*
 * An endpoint's name is its sockaddr with a random key where the
 * sockaddr has room the kernel ignores: AF_INET's sin_zero (64 bits),
 * AF_INET6's sin6_flowinfo (32 bits).  A name without a key (0) is a
 * plain address, as getaddrinfo gives: it names whatever endpoint listens
 * there.
 */
uint64_t ibf_name_key(const struct ibf_name *name)
{
	const struct sockaddr *sa = (const void *)name->bytes;
	uint64_t key = 0;
	uint32_t k6;

	if (sa->sa_family == AF_INET) {
		memcpy(&key, ((const struct sockaddr_in *)sa)->sin_zero, sizeof(key));
	} else if (sa->sa_family == AF_INET6) {
		k6 = ((const struct sockaddr_in6 *)sa)->sin6_flowinfo;
		key = k6;
	}
	return key;
}

void ibf_sockaddr_set_key(struct sockaddr *sa, uint64_t key)
{
	if (sa->sa_family == AF_INET)
		memcpy(((struct sockaddr_in *)sa)->sin_zero, &key, sizeof(key));
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_flowinfo = (uint32_t)key;
}

void ibf_name_set_key(struct ibf_name *name, uint64_t key)
{
	ibf_sockaddr_set_key((struct sockaddr *)name->bytes, key);
}

/* The name as the kernel takes it: the key cleared. */
void ibf_name_sockaddr(const struct ibf_name *name, struct sockaddr_storage *ss)
{
	struct ibf_name plain = *name;

	ibf_name_set_key(&plain, 0);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, plain.bytes, sizeof(plain.bytes));
}

int ibf_name_matches(const struct ibf_name *want, const struct ibf_name *have)
{
	struct ibf_name plain;

	if (!memcmp(want, have, sizeof(*want)))
		return 1;
	if (ibf_name_key(want))
		return 0;
	plain = *have;
	ibf_name_set_key(&plain, 0);
	return !memcmp(want, &plain, sizeof(plain));
}

int ibf_name_from_sockaddr(struct ibf_name *name, const struct sockaddr *sa,
			   size_t len)
{
	memset(name, 0, sizeof(*name));
	if (!sa)
		return -FI_EINVAL;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		struct sockaddr_in *out = (void *)name->bytes;

		out->sin_family = AF_INET;
		out->sin_port = in->sin_port;
		out->sin_addr = in->sin_addr;
		memcpy(out->sin_zero, in->sin_zero, sizeof(out->sin_zero));
	} else if (sa->sa_family == AF_INET6 &&
		   len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		struct sockaddr_in6 *out = (void *)name->bytes;

		out->sin6_family = AF_INET6;
		out->sin6_port = in6->sin6_port;
		out->sin6_addr = in6->sin6_addr;
		out->sin6_scope_id = in6->sin6_scope_id;
		out->sin6_flowinfo = in6->sin6_flowinfo;
	} else {
		return -FI_EINVAL;
	}
	/* Port 0 or a wildcard host cannot name a listening endpoint. */
	if (!ibf_addr_port(sa) || ibf_addr_is_any(sa))
		return -FI_EINVAL;
	return 0;
}

static struct ibf_av *to_ibf_av(struct fid_av *av)
{
	return container_of(av, struct ibf_av, av_fid);
}

#define IBF_AV_SHARED_COUNT 1024
#define IBF_AV_SHARED_MAX (1 << 20)	/* entries of a named AV, at most */
#define IBF_AV_SHM_MAGIC 0x1bfa5a7eu

struct ibf_av_shm {
	uint32_t magic;
	uint32_t addrlen;
	uint64_t count;		/* slots handed out */
	uint64_t cap;
	/* then fi_addr_t map[cap], struct ibf_name names[cap], uint8_t used[cap] */
};

static fi_addr_t *ibf_av_shm_map(struct ibf_av_shm *shm)
{
	return (fi_addr_t *)(shm + 1);
}

static size_t ibf_av_shm_size(size_t cap)
{
	return sizeof(struct ibf_av_shm) +
	       cap * (sizeof(fi_addr_t) + sizeof(struct ibf_name) + 1);
}

/*
 * Lock held: a process sharing a named AV sees the others' inserts.  The
 * count comes from shared memory another process can write: never past
 * the capacity this process mapped.
 */
static void ibf_av_sync(struct ibf_av *av)
{
	uint64_t n;

	if (av->shm) {
		n = __atomic_load_n(&av->shm->count, __ATOMIC_ACQUIRE);
		av->count = n < av->cap ? (size_t)n : av->cap;
	}
}

/*
 * Writers of a named AV in several processes take turns: an flock on its
 * shared memory, which the kernel lets go if the holder dies.
 */
static void ibf_av_shm_lock(struct ibf_av *av, int op)
{
	if (av->shm && !av->readonly)
		while (flock(av->shm_fd, op) && errno == EINTR)
			;
}

/*
 * A named AV that exists already, in fd: adopted only if it is ours to
 * trust (our user's, writable by nobody else) and its header, size and
 * counts agree with each other and with this domain.  Returns its
 * capacity, or 0 and a warning saying why not.
 */
static size_t ibf_av_shm_check(struct ibf_av *av, int fd, const char *name)
{
	struct ibf_av_shm head = { 0 };	/* read whole below, or refused */
	struct stat st;
	const char *why = NULL;

	if (fstat(fd, &st))
		why = strerror(errno);
	else if (st.st_uid != geteuid())
		why = "it belongs to another user";
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		why = "others may write it";
	else if (pread(fd, &head, sizeof(head), 0) != sizeof(head) ||
		 head.magic != IBF_AV_SHM_MAGIC)
		why = "it is not an ibfab AV";
	else if (head.addrlen != av->addrlen)
		why = "its addresses are of another format";
	else if (!head.cap || head.cap > IBF_AV_SHARED_MAX ||
		 (uint64_t)st.st_size != ibf_av_shm_size((size_t)head.cap) ||
		 head.count > head.cap)
		why = "its size and counts do not agree";
	if (!why)
		return (size_t)head.cap;
	IBF_WARN(FI_LOG_AV, "shared AV %s: not opened: %s (remove /dev/shm%s "
		 "if it is stale)\n", name, why, av->shm_name ? av->shm_name : "");
	return 0;
}

/* Map cap entries of fd; the creator also writes the header. */
static int ibf_av_shm_map_fd(struct ibf_av *av, int fd, size_t cap, int created)
{
	int ro = av->readonly;

	av->shm_len = ibf_av_shm_size(cap);
	av->shm = mmap(NULL, av->shm_len, ro ? PROT_READ : PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, 0);
	if (av->shm == MAP_FAILED) {
		av->shm = NULL;
		return ibf_errno_to_fi(errno);
	}
	if (created) {
		av->shm->addrlen = (uint32_t)av->addrlen;
		av->shm->cap = cap;
		av->shm->count = 0;
		__atomic_store_n(&av->shm->magic, IBF_AV_SHM_MAGIC, __ATOMIC_RELEASE);
	}
	av->cap = cap;
	av->names = (struct ibf_name *)(ibf_av_shm_map(av->shm) + cap);
	av->used = (uint8_t *)(av->names + cap);
	return 0;
}

/*
 * Open or create the shared memory behind a named AV (fi_av(3)): without
 * FI_READ it is created if it does not exist, and shared if it does
 * (never truncated: other processes use it); FI_READ opens one that
 * exists.  An existing one is checked before it is used.
 */
static int ibf_av_shm_open(struct ibf_av *av, struct fi_av_attr *attr)
{
	size_t cap = attr->count ? attr->count : IBF_AV_SHARED_COUNT;
	int ro = !!(attr->flags & FI_READ), fd, created = 0, ret;
	char path[256];

	snprintf(path, sizeof(path), "/ibfab-av-%s", attr->name);
	for (char *c = path + 1; *c; c++)
		if (*c == '/')
			*c = '_';
	if (!ro && cap > IBF_AV_SHARED_MAX) {
		IBF_WARN(FI_LOG_AV, "shared AV %s: count %zu, at most %d\n",
			 attr->name, cap, IBF_AV_SHARED_MAX);
		return -FI_EINVAL;
	}
	av->readonly = ro;
	av->shm_name = strdup(path);
	if (!av->shm_name)
		return -FI_ENOMEM;
	fd = ro ? -1 : shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		created = 1;
		if (ftruncate(fd, (off_t)ibf_av_shm_size(cap))) {
			ret = ibf_errno_to_fi(errno);
			goto fail_unlink;
		}
	} else if (ro || errno == EEXIST) {
		fd = shm_open(path, ro ? O_RDONLY : O_RDWR, 0);
		if (fd < 0 || !(cap = ibf_av_shm_check(av, fd, attr->name))) {
			ret = fd < 0 ? ibf_errno_to_fi(errno) : -FI_EACCES;
			if (fd < 0)
				IBF_WARN(FI_LOG_AV, "shared AV %s: %s%s\n", attr->name,
					 strerror(errno), ro ? " (FI_READ opens "
					 "an AV another process created)" : "");
			goto fail;
		}
	} else {
		ret = ibf_errno_to_fi(errno);
		IBF_WARN(FI_LOG_AV, "shared AV %s: %s\n", attr->name, strerror(errno));
		goto fail;
	}
	ret = ibf_av_shm_map_fd(av, fd, cap, created);
	if (ret)
		goto fail_unlink;
	if (ro) {
		close(fd);
		fd = -1;
	}
	av->shm_fd = fd;	/* writers keep it, to take turns (flock) */
	if (!created) {		/* the creator unlinks it at close */
		free(av->shm_name);
		av->shm_name = NULL;
	}
	attr->map_addr = ibf_av_shm_map(av->shm);
	ibf_av_sync(av);
	return 0;
fail_unlink:
	if (created)
		shm_unlink(path);
fail:
	if (fd >= 0)
		close(fd);
	free(av->shm_name);
	av->shm_name = NULL;
	return ret;
}

int ibf_av_name(struct ibf_av *av, fi_addr_t addr, struct ibf_name *name)
{
	int ret = -FI_ENOENT;

	pthread_mutex_lock(&av->lock);
	ibf_av_sync(av);
	if (addr < av->count && av->used[addr]) {
		*name = av->names[addr];
		ret = 0;
	}
	pthread_mutex_unlock(&av->lock);
	return ret;
}

fi_addr_t ibf_av_find(struct ibf_av *av, const struct ibf_name *name)
{
	fi_addr_t found = FI_ADDR_NOTAVAIL;
	size_t i;

	pthread_mutex_lock(&av->lock);
	ibf_av_sync(av);
	for (i = 0; i < av->count; i++) {
		if (av->used[i] && !memcmp(&av->names[i], name, sizeof(*name))) {
			found = i;
			break;
		}
	}
	/* Else an entry the application inserted as a plain address. */
	for (i = 0; found == FI_ADDR_NOTAVAIL && i < av->count; i++)
		if (av->used[i] && !ibf_name_key(&av->names[i]) &&
		    ibf_name_matches(&av->names[i], name))
			found = i;
	pthread_mutex_unlock(&av->lock);
	return found;
}

/* Lock held.  The lowest unused index, growing the table if full. */
static int ibf_av_slot(struct ibf_av *av, size_t *slot)
{
	struct ibf_name *names;
	uint8_t *used;
	size_t i, cap;

	for (i = 0; i < av->count; i++) {
		if (!av->used[i]) {
			*slot = i;
			return 0;
		}
	}
	if (av->count == av->cap && av->shm) {
		IBF_WARN(FI_LOG_AV, "shared AV full (%zu): open it with a larger "
			 "count\n", av->cap);
		return -FI_ENOSPC;
	}
	if (av->count == av->cap) {
		cap = av->cap ? av->cap * 2 : 64;
		names = realloc(av->names, cap * sizeof(*names));
		if (!names)
			return -FI_ENOMEM;
		av->names = names;
		used = realloc(av->used, cap);
		if (!used)
			return -FI_ENOMEM;
		memset(used + av->cap, 0, cap - av->cap);
		av->used = used;
		av->cap = cap;
	}
	*slot = av->count++;
	return 0;
}

/* Insert one name; returns its fi_addr or -FI_E*. */
static int ibf_av_insert_name(struct ibf_av *av, const struct ibf_name *name,
			      fi_addr_t *out)
{
	size_t slot;
	int ret;

	ibf_av_shm_lock(av, LOCK_EX);
	pthread_mutex_lock(&av->lock);
	ibf_av_sync(av);
	ret = ibf_av_slot(av, &slot);
	if (!ret) {
		av->names[slot] = *name;
		av->used[slot] = 1;
		*out = slot;
		if (av->shm) {
			ibf_av_shm_map(av->shm)[slot] = slot;
			__atomic_store_n(&av->shm->count, av->count, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&av->lock);
	ibf_av_shm_lock(av, LOCK_UN);
	return ret;
}

static void ibf_av_result(struct ibf_av *av, uint64_t flags, void *context,
			  size_t i, int err)
{
	struct fi_eq_err_entry e = { 0 };

	if ((flags & FI_SYNC_ERR) && context)
		((int *)context)[i] = -err;
	if (av->events && err) {
		e.fid = &av->av_fid.fid;
		e.context = context;
		e.data = i;
		e.err = -err;
		ibf_eq_push(av->eq, FI_AV_COMPLETE, &e, sizeof(e), IBF_EQ_ERR,
			    NULL, 0);
	}
}

/* FI_EVENT: the call's completion; the call itself returns 0. */
static int ibf_av_complete(struct ibf_av *av, void *context, int done)
{
	struct fi_eq_entry e = { .fid = &av->av_fid.fid, .context = context,
				 .data = (uint64_t)done };

	if (!av->events)
		return done;
	ibf_eq_push(av->eq, FI_AV_COMPLETE, &e, sizeof(e), 0, NULL, 0);
	return 0;
}

static int ibf_av_check_flags(uint64_t flags)
{
	if (flags & ~(FI_MORE | FI_SYNC_ERR)) {
		IBF_WARN(FI_LOG_AV, "insert flags %#llx: ibfab takes FI_MORE and "
			 "FI_SYNC_ERR\n", (unsigned long long)flags);
		return -FI_EINVAL;
	}
	return 0;
}

static int ibf_av_insert(struct fid_av *av_fid, const void *addr, size_t count,
			 fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct ibf_av *av = to_ibf_av(av_fid);
	const uint8_t *p = addr;
	struct ibf_name name;
	fi_addr_t out;
	size_t i;
	int ret, done = 0;
	char buf[64];

	ret = ibf_av_check_flags(flags);
	if (ret)
		return ret;
	if (av->readonly) {
		IBF_WARN(FI_LOG_AV, "fi_av_insert into an AV opened FI_READ\n");
		return -FI_EOPNOTSUPP;
	}
	if (av->events && !av->eq) {
		IBF_WARN(FI_LOG_AV, "an FI_EVENT AV needs an EQ: fi_av_bind "
			 "first\n");
		return -FI_ENOEQ;
	}
	if (count && !addr) {
		IBF_WARN(FI_LOG_AV, "fi_av_insert of %zu addresses from NULL\n",
			 count);
		return -FI_EINVAL;
	}
	for (i = 0; i < count; i++, p += av->addrlen) {
		out = FI_ADDR_NOTAVAIL;
		ret = ibf_name_from_sockaddr(&name, (const void *)p, av->addrlen);
		if (ret || ((const struct sockaddr *)p)->sa_family !=
		    (av->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET)) {
			ret = -FI_EINVAL;
			IBF_WARN(FI_LOG_AV, "address %zu (%s) is not an ibfab "
				 "endpoint name: give what fi_getname returned "
				 "(format %s)\n", i,
				 ibf_addr_str((const void *)p, buf, sizeof(buf)),
				 av->addr_format == FI_SOCKADDR_IN6 ?
				 "FI_SOCKADDR_IN6" : "FI_SOCKADDR_IN");
		} else {
			ret = ibf_av_insert_name(av, &name, &out);
		}
		if (fi_addr)
			fi_addr[i] = out;
		ibf_av_result(av, flags, context, i, ret);
		if (!ret)
			done++;
	}
	return ibf_av_complete(av, context, done);
}

static int ibf_av_insertsvc(struct fid_av *av_fid, const char *node,
			    const char *service, fi_addr_t *fi_addr,
			    uint64_t flags, void *context)
{
	struct ibf_av *av = to_ibf_av(av_fid);
	struct sockaddr_storage ss;
	int ret, family = av->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;

	ret = ibf_av_check_flags(flags);
	if (ret)
		return ret;
	if (!node || !service) {
		IBF_WARN(FI_LOG_AV, "fi_av_insertsvc needs a node and a service\n");
		return -FI_EINVAL;
	}
	ret = ibf_addr_resolve(node, service, 0, family, &ss);
	if (ret) {
		IBF_WARN(FI_LOG_AV, "%s:%s does not resolve to an %s address\n",
			 node, service, family == AF_INET6 ? "IPv6" : "IPv4");
		if (fi_addr)
			*fi_addr = FI_ADDR_NOTAVAIL;
		if (av->events && !av->eq)
			return -FI_ENOEQ;
		ibf_av_result(av, flags, context, 0, -FI_EINVAL);
		return ibf_av_complete(av, context, 0);
	}
	return ibf_av_insert(av_fid, &ss, 1, fi_addr, flags, context);
}

static int ibf_av_insertsym(struct fid_av *av_fid, const char *node,
			    size_t nodecnt, const char *service, size_t svccnt,
			    fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	IBF_WARN(FI_LOG_AV, "fi_av_insertsym is not supported: insert each "
		 "address with fi_av_insert\n");
	return -FI_ENOSYS;
}


void ibf_av_attach(struct ibf_av *av, struct ibf_av_user *u)
{
	pthread_mutex_lock(&av->eps_lock);
	u->next = av->eps;
	av->eps = u;
	pthread_mutex_unlock(&av->eps_lock);
}

void ibf_av_detach(struct ibf_av *av, struct ibf_av_user *u)
{
	struct ibf_av_user **p;

	pthread_mutex_lock(&av->eps_lock);
	for (p = &av->eps; *p; p = &(*p)->next) {
		if (*p == u) {
			*p = u->next;
			break;
		}
	}
	pthread_mutex_unlock(&av->eps_lock);
}

/* Every endpoint bound forgets addr before it can be handed out again. */
static void ibf_av_forget(struct ibf_av *av, fi_addr_t addr)
{
	struct ibf_av_user *u;

	pthread_mutex_lock(&av->eps_lock);
	for (u = av->eps; u; u = u->next)
		u->forget(u, addr);
	pthread_mutex_unlock(&av->eps_lock);
}

static int ibf_av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr,
			 size_t count, uint64_t flags)
{
	struct ibf_av *av = to_ibf_av(av_fid);
	size_t i;

	if (flags || (count && !fi_addr) || av->readonly) {
		IBF_WARN(FI_LOG_AV, "fi_av_remove: flags must be 0, fi_addr an "
			 "array, and the AV not opened FI_READ\n");
		return -FI_EINVAL;
	}
	for (i = 0; i < count; i++) {
		if (fi_addr[i] >= av->count || !av->used[fi_addr[i]]) {
			IBF_WARN(FI_LOG_AV, "fi_av_remove: fi_addr %llu is not "
				 "in the AV\n", (unsigned long long)fi_addr[i]);
			return -FI_EINVAL;
		}
	}
	for (i = 0; i < count; i++) {
		ibf_av_forget(av, fi_addr[i]);
		ibf_av_shm_lock(av, LOCK_EX);
		pthread_mutex_lock(&av->lock);
		av->used[fi_addr[i]] = 0;
		pthread_mutex_unlock(&av->lock);
		ibf_av_shm_lock(av, LOCK_UN);
	}
	return 0;
}

static int ibf_av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr,
			 size_t *addrlen)
{
	struct ibf_av *av = to_ibf_av(av_fid);
	struct ibf_name name;

	if (!addrlen)
		return -FI_EINVAL;
	if (ibf_av_name(av, fi_addr, &name)) {
		IBF_WARN(FI_LOG_AV, "fi_av_lookup: fi_addr %llu is not in the "
			 "AV\n", (unsigned long long)fi_addr);
		return -FI_ENOENT;
	}
	if (addr)
		memcpy(addr, &name, IBF_MIN(*addrlen, av->addrlen));
	*addrlen = av->addrlen;
	return 0;
}

static const char *ibf_av_straddr(struct fid_av *av_fid, const void *addr,
				  char *buf, size_t *len)
{
	char tmp[80], host[64];

	if (!addr || !len)
		return NULL;
	ibf_addr_str(addr, host, sizeof(host));
	snprintf(tmp, sizeof(tmp), "%s", host);
	if (buf && *len)
		snprintf(buf, *len, "%s", tmp);
	*len = strlen(tmp) + 1;
	return buf;
}

static int ibf_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ibf_av *av = container_of(fid, struct ibf_av, av_fid.fid);

	if (!bfid || bfid->fclass != FI_CLASS_EQ || flags || av->eq) {
		IBF_WARN(FI_LOG_AV, "fi_av_bind takes one EQ, flags 0\n");
		return -FI_EINVAL;
	}
	av->eq = container_of(bfid, struct ibf_eq, eq_fid.fid);
	ibf_ref_get(&av->eq->ref);
	return 0;
}

static int ibf_av_close(struct fid *fid)
{
	struct ibf_av *av = container_of(fid, struct ibf_av, av_fid.fid);

	if (ibf_ref_read(&av->ref)) {
		IBF_WARN(FI_LOG_AV, "AV still bound to %d endpoint(s): close "
			 "them first\n", ibf_ref_read(&av->ref));
		return -FI_EBUSY;
	}
	if (av->eq)
		ibf_ref_put(&av->eq->ref);
	ibf_ref_put(&av->domain->ref);
	pthread_mutex_destroy(&av->eps_lock);
	pthread_mutex_destroy(&av->lock);
	if (av->shm) {
		munmap(av->shm, av->shm_len);
		if (av->shm_fd >= 0)
			close(av->shm_fd);
		if (av->shm_name)
			shm_unlink(av->shm_name);
		free(av->shm_name);
	} else {
		free(av->names);
		free(av->used);
	}
	free(av);
	return 0;
}

static struct fi_ops ibf_av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_av_close,
	.bind = ibf_av_bind,
	.control = ibf_no_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

static struct fi_ops_av ibf_av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = ibf_av_insert,
	.insertsvc = ibf_av_insertsvc,
	.insertsym = ibf_av_insertsym,
	.remove = ibf_av_remove,
	.lookup = ibf_av_lookup,
	.straddr = ibf_av_straddr,
};

int ibf_av_open(struct fid_domain *domain_fid, struct fi_av_attr *attr,
		struct fid_av **av_fid, void *context)
{
	struct ibf_domain *dom = to_ibf_domain(domain_fid);
	struct ibf_av *av;

	if (!attr || !av_fid) {
		IBF_WARN(FI_LOG_AV, "fi_av_open needs attributes\n");
		return -FI_EINVAL;
	}
	if (attr->flags & ~(uint64_t)(FI_SYMMETRIC | FI_READ | FI_EVENT)) {
		IBF_WARN(FI_LOG_AV, "AV flags %#llx: ibfab takes FI_EVENT, "
			 "FI_READ and FI_SYMMETRIC\n", (unsigned long long)attr->flags);
		return -FI_ENOSYS;
	}
	if ((attr->flags & FI_READ) && !attr->name) {
		IBF_WARN(FI_LOG_AV, "FI_READ opens a named AV: give its name\n");
		return -FI_EINVAL;
	}
	if (attr->rx_ctx_bits) {
		IBF_WARN(FI_LOG_AV, "rx_ctx_bits: no scalable endpoints\n");
		return -FI_ENOSYS;
	}
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP &&
	    attr->type != FI_AV_TABLE) {
		char t[IBF_ENUM_STR];

		IBF_WARN(FI_LOG_AV, "AV type %s: use FI_AV_MAP or FI_AV_TABLE\n",
			 ibf_enum_str(t, sizeof(t), FI_TYPE_AV_TYPE, attr->type));
		return -FI_EINVAL;
	}
	av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->domain = dom;
	av->type = attr->type == FI_AV_UNSPEC ? FI_AV_MAP : attr->type;
	av->events = !!(attr->flags & FI_EVENT);
	av->addr_format = dom->info->addr_format;
	av->addrlen = av->addr_format == FI_SOCKADDR_IN6 ?
		      sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	av->shm_fd = -1;
	pthread_mutex_init(&av->lock, NULL);
	pthread_mutex_init(&av->eps_lock, NULL);
	if (attr->name) {
		int ret = ibf_av_shm_open(av, attr);

		if (ret) {
			pthread_mutex_destroy(&av->eps_lock);
			pthread_mutex_destroy(&av->lock);
			free(av);
			return ret;
		}
	}
	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = &ibf_av_fi_ops;
	av->av_fid.ops = &ibf_av_ops;
	attr->type = av->type;
	ibf_ref_get(&dom->ref);
	*av_fid = &av->av_fid;
	return 0;
}
