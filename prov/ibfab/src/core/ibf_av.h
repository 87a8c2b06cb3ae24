/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Address vectors (ibf_av.c) and the names they hold: an RDM endpoint's
 * name is its rdma_cm address with a key only its owner hands out.
 * Endpoints bound to an AV hear of removed addresses through the hook
 * they attach (struct ibf_av_user).
 */
#ifndef IBF_AV_H
#define IBF_AV_H

#include "ibf.h"

/*
 * An endpoint bound to an AV embeds one of these and attaches it
 * (ibf_av_attach): fi_av_remove calls forget for each address it takes
 * out, before the address can be handed out again, under av->eps_lock.
 */
struct ibf_av_user {
	void (*forget)(struct ibf_av_user *u, fi_addr_t addr);
	struct ibf_av_user *next;	/* the AV's, under eps_lock */
};

/* An RDM endpoint's address: a sockaddr_in or sockaddr_in6, zero padded. */
#define IBF_ADDR_MAX sizeof(struct sockaddr_in6)
struct ibf_name {
	uint8_t bytes[IBF_ADDR_MAX];
};

/* ---- address vector ---- */
struct ibf_av_shm;

struct ibf_av {
	struct fid_av av_fid;
	struct ibf_domain *domain;
	enum fi_av_type type;
	uint32_t addr_format;	/* FI_SOCKADDR_IN or FI_SOCKADDR_IN6 */
	size_t addrlen;
	pthread_mutex_t lock;	/* inserts and removes from any thread */
	struct ibf_name *names;
	uint8_t *used;
	/*
	 * Bound endpoints' hooks, under eps_lock: fi_av_remove
	 * takes it, then each endpoint's lock; the data path takes its
	 * endpoint's lock, then av->lock: never the two AV locks nested.
	 */
	pthread_mutex_t eps_lock;
	struct ibf_av_user *eps;
	size_t count, cap;	/* slots handed out, slots allocated */
	int ref;		/* endpoints bound */
	/* A named AV lives in shared memory: names, used and map are there. */
	struct ibf_av_shm *shm;
	size_t shm_len;
	char *shm_name;		/* set by the creator, who unlinks it */
	int shm_fd;		/* a writer's, for flock; -1 otherwise */
	int readonly;		/* opened with FI_READ */
	/* FI_EVENT: each insert call's outcome is written to this EQ. */
	int events;
	struct ibf_eq *eq;
};
int ibf_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		struct fid_av **av, void *context);
/* The name at fi_addr: 0, or -FI_ENOENT if there is none. */
int ibf_av_name(struct ibf_av *av, fi_addr_t addr, struct ibf_name *name);
/* The fi_addr of a name, or FI_ADDR_NOTAVAIL. */
fi_addr_t ibf_av_find(struct ibf_av *av, const struct ibf_name *name);
/* Canonical name of a sockaddr (address, port and key); 0 or -FI_EINVAL. */
int ibf_name_from_sockaddr(struct ibf_name *name, const struct sockaddr *sa,
			   size_t len);
/*
 * Names carry a random key in the sockaddr bytes the kernel ignores
 * (sin_zero for IPv4: 64 bits; sin6_flowinfo for IPv6: 32 bits), so that
 * nobody who was not given an endpoint's name can pass for it.  0: a plain
 * address (no key).
 */
uint64_t ibf_name_key(const struct ibf_name *name);
void ibf_name_set_key(struct ibf_name *name, uint64_t key);
/* The same on a sockaddr (AF_INET or AF_INET6; others untouched). */
void ibf_sockaddr_set_key(struct sockaddr *sa, uint64_t key);
/* The sockaddr for the kernel (rdma_cm): the key cleared. */
void ibf_name_sockaddr(const struct ibf_name *name, struct sockaddr_storage *ss);
/* have is the endpoint want names: the same name, or want is a plain
 * address (no key) and have is the endpoint at that address. */
int ibf_name_matches(const struct ibf_name *want, const struct ibf_name *have);

/* An endpoint bound to av, or no longer bound. */
void ibf_av_attach(struct ibf_av *av, struct ibf_av_user *u);
void ibf_av_detach(struct ibf_av *av, struct ibf_av_user *u);

#endif /* IBF_AV_H */
