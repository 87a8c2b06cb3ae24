/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibfab: a libfabric provider over rdma-core (libibverbs, librdmacm).
 *
 * Object model and ownership
 *   fabric  an RDMA network; owns nothing but a reference count.
 *   domain  one verbs device: the ibv_context from librdmacm's device list
 *           (so rdma_cm ids and our QPs share it) and one protection domain.
 *   mr      an ibv_mr in the domain's PD; desc is the ibf_mr, key the rkey.
 *   cq      an ibv_cq, with a completion channel when it has a wait object.
 *   eq      an rdma_cm event channel plus an eventfd for fi_eq_write, both
 *           behind one epoll fd that is the EQ's wait object.
 *
 * Every parent counts its children (ref) and refuses to close, with
 * -FI_EBUSY, while any is open.  Counts are atomic: children may be opened
 * and closed from any thread whatever the threading level.
 *
 * Only libfabric's public headers are used; the helpers a provider inside
 * libfabric would take from its util code live in ibf_util.h.
 */
#ifndef IBF_H
#define IBF_H

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "ibf_util.h"

#define IBF_PROV_NAME "ibfab"
#define IBF_PROV_VERSION FI_VERSION(0, 1)
#define IBF_FI_VERSION FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

extern struct fi_provider ibf_prov;

/* One warn macro: what went wrong and what to do about it. */
#define IBF_WARN(subsys, ...) FI_WARN(&ibf_prov, subsys, __VA_ARGS__)
#define IBF_INFO(subsys, ...) FI_INFO(&ibf_prov, subsys, __VA_ARGS__)
/*
 * Debug lines (state changes, events) at FI_LOG_LEVEL=debug in every
 * build: libfabric's FI_DBG is compiled out unless ENABLE_DEBUG, which no
 * distribution's build of an external provider defines.  Control paths
 * only: each costs a fi_log_enabled call.
 */
#define IBF_DBG(subsys, ...) FI_LOG(&ibf_prov, FI_LOG_DEBUG, subsys, __VA_ARGS__)

/* Runtime parameters, FI_IBFAB_<NAME>; see ibf_params.c and fi_ibfab(7). */
struct ibf_params {
	size_t tx_size;
	size_t rx_size;
	size_t tx_iov_limit;
	size_t rx_iov_limit;
	size_t inline_size;	/* 0: the device's limit */
	size_t cq_size;
	char *iface;		/* NULL: every interface */
	char *device;		/* NULL: every device; else names, commas between */
	int link_local;		/* list IPv6 link-local addresses too */
	int rdm_rndv_windows;	/* RDM: open rendezvous sends to their reader
				 * through memory windows where the device
				 * has them; -1 (unset): the device's
				 * kind decides */
	int rdm_requested_keys;	/* RDM: requested keys even if hints allow
				 * the device's */
	int cm_timeout_ms;
	int min_rnr_timer;	/* IB encoding, 1..31 */
	int ack_timeout;	/* IB encoding, 1..31; 0: rdma_cm's */
	int retry_count;	/* transport retries, 0..6 */
	size_t eager_size;	/* RDM rendezvous threshold; tagged mode's limit */
	size_t rdm_qp_depth;	/* send queue of each RDM queue pair */
	size_t rdm_connect_ms;	/* RDM: how long a refused peer is retried */
	size_t rdm_unexp_max;	/* RDM: extra eager buffers for a backlog */
	size_t rdm_max_conns;	/* RDM: connections peers asked for, at most */
	size_t mr_cache_max;	/* registration cache entries; 0: none */
};
extern struct ibf_params ibf_params;
void ibf_params_define(void);
void ibf_params_load(void);

/* Capabilities of an FI_EP_MSG endpoint. */
#define IBF_MSG_PRIMARY_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | \
			      FI_SEND | FI_RECV | FI_READ | FI_WRITE | \
			      FI_REMOTE_READ | FI_REMOTE_WRITE)
#define IBF_DOMAIN_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define IBF_MSG_SECONDARY_CAPS (IBF_DOMAIN_CAPS | FI_MULTI_RECV)
#define IBF_MSG_CAPS (IBF_MSG_PRIMARY_CAPS | IBF_MSG_SECONDARY_CAPS)
#define IBF_MR_MODE (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | \
		     FI_MR_PROV_KEY)
/* RDM endpoints with RMA: the device's keys and virtual addresses; local
 * buffers need no registration. */
#define IBF_RDM_RMA_MR_MODE (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)
/* RC orders sends after sends and RDMA after RDMA of the same kind. */
#define IBF_MSG_ORDER (FI_ORDER_SAS | FI_ORDER_SAW | FI_ORDER_WAS | \
		       FI_ORDER_WAW | FI_ORDER_RAR | FI_ORDER_RAW | \
		       FI_ORDER_RAS)
#define IBF_TX_OP_FLAGS (FI_COMPLETION | FI_INJECT | FI_TRANSMIT_COMPLETE | \
			 FI_DELIVERY_COMPLETE | FI_INJECT_COMPLETE)
#define IBF_RX_OP_FLAGS (FI_COMPLETION | FI_MULTI_RECV)
/* FI_OPT_MIN_MULTI_RECV until the application sets it. */
#define IBF_MIN_MULTI_RECV 64
/* Remote CQ data (immediate data) consumes a posted receive. */
#define IBF_RX_MODE (FI_RX_CQ_DATA)
#define IBF_CQ_DATA_SIZE 4
#define IBF_RDM_CQ_DATA_SIZE 8	/* carried in the RDM header */
#define IBF_RDM_IOV_LIMIT 4
#define IBF_RDM_RX_SIZE 4096	/* posted receives an RDM endpoint takes */
#define IBF_RDM_MAX_MSG_SIZE (1ULL << 32)
#define IBF_MR_KEY_SIZE 4
/* What fi_info->nic says of a device and port (ibf_nic.c). */
struct ibf_nic_facts {
	uint32_t vendor_id, vendor_part_id, hw_ver;
	char fw_ver[64];
	char driver[32];	/* sysfs; "" if none */
	uint8_t active_mtu, active_speed, active_width, link_layer;
	int port_state;
	int has_pci;
	struct fi_pci_attr pci;
};
/* The fid_nic of those facts for the fi_info at addr; NULL if out of
 * memory.  libfabric's fi_dupinfo and fi_freeinfo copy and close it. */
struct fid_nic *ibf_nic_new(const struct ibf_nic_facts *f, const char *dev_name,
			    const struct sockaddr *addr);
/* Facts from sysfs: the PCI address and the driver (none for software
 * devices such as rxe). */
void ibf_nic_sysfs(const char *dev_name, struct ibf_nic_facts *f);
/* The PCI address a sysfs device path ends in ("0000:3b:00.0"). */
int ibf_nic_pci_parse(const char *path, struct fi_pci_attr *pci);
/* Link speed in bits/s from verbs' active_speed and active_width codes. */
size_t ibf_nic_speed(uint8_t active_speed, uint8_t active_width);

/* What discovery learns about one usable (device, port, address). */
struct ibf_dev_limits {
	char dev_name[64];
	char fabric_name[64];
	uint8_t port;
	uint32_t max_msg_sz;
	int max_qp_wr;
	int max_sge;
	int max_cqe;
	int max_cq;
	int max_qp;
	int max_mr;
	int max_srq;
	uint32_t max_inline;
	struct ibf_nic_facts nic;
};

/*
 * The flag libfabric's utility providers (ofi_rxm, ofi_rxd) add when they
 * ask core providers for endpoints to layer on.  Not in the public headers;
 * its value has been stable since libfabric 1.5.
 */
#define IBF_CORE_PROV_ONLY (1ULL << 59)

/* ibf_info.c: discovery and fi_getinfo. */
int ibf_getinfo(uint32_t version, const char *node, const char *service,
		uint64_t flags, const struct fi_info *hints,
		struct fi_info **info);
void ibf_info_cleanup(void);

/* ibf_info_match.c: templates and hint filtering, no device needed. */
/* Whether FI_IBFAB_DEVICE lets the device of this name in (ibf_info.c). */
int ibf_device_wanted(const char *name);
struct fi_info *ibf_info_template(const struct ibf_dev_limits *lim,
				  const struct sockaddr *src);
struct fi_info *ibf_info_template_rdm(const struct ibf_dev_limits *lim,
				      const struct sockaddr *src);
int ibf_info_match(const struct fi_info *tmpl, uint32_t version,
		   const struct fi_info *hints, char *why, size_t why_len);
int ibf_info_narrow(struct fi_info *info, uint32_t version,
		    const struct fi_info *hints);

/* ibf_addr.c: socket addresses, no device needed. */
int ibf_addr_resolve(const char *node, const char *service, int passive,
		     int family, struct sockaddr_storage *out);
size_t ibf_addr_len(const struct sockaddr *sa);
uint32_t ibf_addr_format(const struct sockaddr *sa);
int ibf_addr_same_host(const struct sockaddr *a, const struct sockaddr *b);
uint16_t ibf_addr_port(const struct sockaddr *sa);
void ibf_addr_set_port(struct sockaddr *sa, uint16_t port);
int ibf_addr_is_link_local(const struct sockaddr *sa);
int ibf_addr_is_any(const struct sockaddr *sa);
const char *ibf_addr_str(const struct sockaddr *sa, char *buf, size_t len);

/* ibf_util.c: 0, -FI_ENOSYS (a wait object ibfab lacks) or -FI_EINVAL. */
int ibf_check_wait_obj(enum fi_wait_obj wait_obj);

/* ibf_errno.c: a completion's status as a positive FI_E* (0: success);
 * the success every completion but a failed one has, inline. */
int ibf_wc_status_to_fi_failed(enum ibv_wc_status status);
static inline int ibf_wc_status_to_fi(enum ibv_wc_status status)
{
	return likely(status == IBV_WC_SUCCESS) ? 0 :
	       ibf_wc_status_to_fi_failed(status);
}
int ibf_errno_to_fi(int err);
/* The same, for a data-path call the application may retry: ENOMEM (a
 * full send queue, pinned memory short) is -FI_EAGAIN. */
int ibf_errno_to_fi_retry(int err);

/* ---- fabric ---- */
struct ibf_fabric {
	struct fid_fabric fabric_fid;
	int ref;
	uint32_t api_version;	/* the application's (ibf_abi.h) */
};
int ibf_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		    void *context);

/*
 * How a CQ or a counter drives an endpoint bound to it without knowing its
 * kind: the endpoint embeds one of these and registers it at bind.
 * progress moves the endpoint's data; sink, if not NULL, is the
 * fi_cq_read running it (ibf_cq_sink_take).  trywait answers 0 when the
 * endpoint is armed with nothing to do, so a sleep misses nothing, or
 * -FI_EAGAIN.  Called under the CQ's or counter's lock.
 */
struct ibf_cq_sink;
struct ibf_cq;		/* ibf_cq.h */
struct ibf_cntr;	/* ibf_cntr.h */
struct ibf_progress {
	void (*progress)(struct ibf_progress *p, struct ibf_cq_sink *sink);
	int (*trywait)(struct ibf_progress *p);
	/*
	 * Optional: a whole fi_cq_readfrom (arguments checked) of a CQ this
	 * endpoint alone feeds, without cq->lock.  The CQ then jumps
	 * straight here, so that a read has one frame between the
	 * application and the device poll, not two.  It progresses as
	 * progress does, with a sink of (cq, buf, src, count), and returns
	 * ibf_cq_progressed(..., 0) of what that wrote.
	 */
	ssize_t (*sole_read)(struct ibf_progress *p, struct ibf_cq *cq,
			     void *buf, size_t count, fi_addr_t *src);
	/*
	 * Optional, with sole_read, and only where sole_read needs no lock
	 * at all (set for good before the endpoint's ibf_cq_add_ep):
	 * the CQ's whole read table, its read the endpoint's own
	 * (ibf_cq_sole_ops_derive makes one), so that fi_cq_read jumps
	 * straight to the endpoint, not through the CQ's jump to sole_read.
	 * The read finds the endpoint in the CQ's sole.
	 */
	struct fi_ops_cq *sole_ops;
};

/*
 * What core opens of the wings, filled in once by fi_prov_ini (ibf_init.c,
 * the one file above the wings) before libfabric calls anything else, so
 * that core names no wing: fi_endpoint by endpoint type, fi_srx_context
 * (FI_EP_MSG), fi_passive_ep (FI_EP_MSG), and fi_atomic's way out.
 */
struct ibf_atomic_port;
struct ibf_wing_ops {
	int (*msg_ep_open)(struct fid_domain *domain, struct fi_info *info,
			   struct fid_ep **ep, void *context);
	int (*rdm_ep_open)(struct fid_domain *domain, struct fi_info *info,
			   struct fid_ep **ep, void *context);
	int (*srx_open)(struct fid_domain *domain, struct fi_rx_attr *attr,
			struct fid_ep **rx_ep, void *context);
	int (*pep_open)(struct fid_fabric *fabric, struct fi_info *info,
			struct fid_pep **pep, void *context);
	/* How each endpoint kind sends atomics (ibf_atomic_ops.h). */
	const struct ibf_atomic_port *rdm_atomic, *msg_atomic;
};
extern struct ibf_wing_ops ibf_wing_ops;

/* ---- domain ---- */
#define IBF_MR_BUCKET_BITS 10
#define IBF_MR_BUCKETS (1u << IBF_MR_BUCKET_BITS)
struct ibf_mr;
struct ibf_domain {
	struct fid_domain domain_fid;
	struct ibf_fabric *fabric;
	struct ibv_context **dev_list;	/* rdma_get_devices(); ours to free */
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_device_attr dev_attr;
	struct fi_info *info;
	int ref;
	/* Its MRs by key, for requests a peer's bytes name (atomics). */
	pthread_mutex_t mr_lock;
	struct ibf_mr *mr_bucket[IBF_MR_BUCKETS];
	/*
	 * Requested keys and offsets (an RDM domain with RMA whose mr_mode
	 * has neither FI_MR_PROV_KEY nor FI_MR_VIRT_ADDR): a region's key is
	 * the one the application asked for, and peers address it from its
	 * start; they learn its device key from us (ibf_mr_key_lookup).
	 * key_gen changes when such a region that a peer may know closes.
	 */
	int req_keys;
	uint32_t key_gen;
	/* ibfab's own registrations of application memory (mr_lock to open):
	 * NULL until first needed, or if the kernel cannot watch memory. */
	struct ibf_mr_cache *mr_cache;
	int mr_cache_tried;
	/*
	 * FI_RMA_EVENT (event_lock): counters bound to its MRs, and its RDM
	 * endpoints that count remote events; each such counter progresses
	 * (and sleeps on) every such endpoint, since any may be the target.
	 */
	pthread_mutex_t event_lock;
	struct ibf_event_ep { struct ibf_progress *ep; int fd; } *event_eps;
	int nevent_eps;
	struct ibf_mr_cntr { struct ibf_cntr *cntr; int refs; } *mr_cntrs;
	int nmr_cntrs;
};
/* An RDM endpoint with FI_RMA_EVENT (fd: its completion channel) feeds
 * the counters bound to the domain's MRs: 0 or -FI_ENOMEM. */
int ibf_domain_event_ep_add(struct ibf_domain *dom, struct ibf_progress *ep,
			    int fd);
void ibf_domain_event_ep_del(struct ibf_domain *dom, struct ibf_progress *ep);
/* The domain's registration cache, opened on first use; NULL if none. */
struct ibf_mr_cache *ibf_domain_mr_cache(struct ibf_domain *dom);
int ibf_domain_open(struct fid_fabric *fabric, struct fi_info *info,
		    struct fid_domain **domain, void *context);

static inline struct ibf_domain *to_ibf_domain(struct fid_domain *d)
{
	return container_of(d, struct ibf_domain, domain_fid);
}

/* ---- memory region ---- */
#define IBF_MR_MAGIC 0x1bfab3e6u
struct ibf_mr {
	struct fid_mr mr_fid;
	uint32_t magic;		/* IBF_MR_MAGIC while open: desc checks */
	struct ibf_domain *domain;
	struct ibv_mr *mr;
	int ibv_access;		/* what it was registered with */
	uint64_t key;		/* what peers name it by: the rkey, or the
				 * requested key (dom->req_keys) */
	uint64_t base;		/* the address peers' address 0 is: 0, or its
				 * start (dom->req_keys: offsets) */
	int told;		/* a peer has looked its key up */
	struct ibf_mr *key_next;	/* in its domain's bucket (mr_lock) */
	/* fi_mr_bind'ed counters: remote writes [0] and reads [1] (FI_RMA_EVENT) */
	struct ibf_cntr *cntr[2];
};
extern struct fi_ops_mr ibf_mr_ops;
/*
 * Whether [addr, addr + len) lies in a region of dom whose key is key and
 * which grants ibv_access (IBV_ACCESS_REMOTE_*), for requests whose key
 * and address come from a peer's bytes: that region, with dom->mr_lock
 * held, so it stays registered (fi_close of it waits) while the caller
 * touches the memory, until ibf_mr_target_release; or NULL, nothing held.
 * The caller touches only memory under the lock: no call that could take
 * another lock or unmap.
 */
struct ibf_mr *ibf_mr_target_hold(struct ibf_domain *dom, uint64_t key,
				  uint64_t addr, size_t len, int ibv_access);
/* The address a peer's (key, addr) names in region mr: addr, or an offset
 * from its start (dom->req_keys). */
static inline void *ibf_mr_target_addr(const struct ibf_mr *mr, uint64_t addr)
{
	return (void *)(uintptr_t)(mr->base + addr);
}
/* What a peer needs to reach the region keyed key with RDMA (requested
 * keys): its start, length, device key and IBV_ACCESS_REMOTE_* rights.
 * 0, or -FI_ENOKEY if dom has no such region.  told: a peer learns it
 * (closing the region then changes dom->key_gen); 0 for our own use. */
struct ibf_mr_key_info {
	uint64_t base;
	uint64_t len;
	uint32_t rkey;
	uint32_t access;
};
int ibf_mr_key_lookup(struct ibf_domain *dom, uint64_t key,
		      struct ibf_mr_key_info *out, int told);
void ibf_mr_target_release(struct ibf_domain *dom);
/* A peer wrote (read 0) or read (1) [addr, addr + len) of the region of
 * dom keyed key: its bound counter counts (FI_RMA_EVENT), if the key
 * names a region that grants that over the whole range; else nothing (a
 * warning). */
void ibf_mr_remote_event(struct ibf_domain *dom, uint64_t key, uint64_t addr,
			 uint64_t len, int read);
int ibf_mr_access_to_ibv(uint64_t access);

/*
 * The lkey behind a descriptor.  A NULL or foreign descriptor is the
 * caller's error, reported rather than dereferenced blindly: the magic is
 * on the line we read anyway.
 */
static inline int ibf_desc_lkey(void *desc, uint32_t *lkey)
{
	struct ibf_mr *mr = desc;

	if (unlikely(!mr || mr->magic != IBF_MR_MAGIC))
		return -FI_EINVAL;
	*lkey = mr->mr->lkey;
	return 0;
}

/*
 * Where registration is optional (RDM: no FI_MR_LOCAL), a descriptor is a
 * hint: its lkey serves only if its region covers [buf, buf + len) and,
 * when the device writes there (need_write), allows local writes.  Else
 * the caller registers the buffer itself.  1 if usable.
 */
static inline int ibf_desc_covers(void *desc, const void *buf, size_t len,
				  int need_write, uint32_t *lkey)
{
	struct ibf_mr *mr = desc;
	uintptr_t a = (uintptr_t)buf, start, end;

	if (!mr || mr->magic != IBF_MR_MAGIC)
		return 0;
	start = (uintptr_t)mr->mr->addr;
	end = start + mr->mr->length;
	if (a < start || a + len > end || a + len < a ||
	    (need_write && !(mr->ibv_access & IBV_ACCESS_LOCAL_WRITE)))
		return 0;
	*lkey = mr->mr->lkey;
	return 1;
}

/*
 * A lock chosen once, from the domain's threading level: taken only where
 * the application may call into one object from several threads at once.
 */
/*
 * ThreadSanitizer cannot see a hand-off through the device: what one
 * thread wrote into an op before posting its work request is read by the
 * thread that polls the completion, ordered by the device and the CQ.
 * Built with -fsanitize=thread (only), a post releases the op and a poll
 * acquires it, so that TSan sees that order; otherwise they are nothing.
 */
#if defined(__SANITIZE_THREAD__)
#define IBF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define IBF_TSAN 1
#endif
#endif
#ifdef IBF_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define ibf_tsan_release(p) __tsan_release((void *)(p))
#define ibf_tsan_acquire(p) __tsan_acquire((void *)(p))
#else
#define ibf_tsan_release(p) ((void)(p))
#define ibf_tsan_acquire(p) ((void)(p))
#endif

/* A spinning CPU tells the core so (it yields to its sibling thread). */
static inline void ibf_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * The lock the threading level asks for, or none.  A test-and-set
 * spinlock written inline: the data path takes two to four of these per
 * message, and glibc's pthread_spin_lock/unlock are calls through the PLT
 * for what is one exchange and one store (about 7 instructions a pair,
 * counted by fabtests/run-instr).  Holders never sleep and hold it for a
 * few hundred instructions at most.
 */
struct ibf_lock {
	int busy;
	int enabled;
};

static inline void ibf_lock_init(struct ibf_lock *lk, int enabled)
{
	lk->enabled = enabled;
	lk->busy = 0;
}

static inline void ibf_lock_fini(struct ibf_lock *lk)
{
	(void)lk;
}

static inline void ibf_lock_acquire(struct ibf_lock *lk)
{
	if (!lk->enabled)
		return;
	while (__atomic_exchange_n(&lk->busy, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&lk->busy, __ATOMIC_RELAXED))
			ibf_cpu_relax();
}

static inline void ibf_lock_release(struct ibf_lock *lk)
{
	if (lk->enabled)
		__atomic_store_n(&lk->busy, 0, __ATOMIC_RELEASE);
}

/* Does this threading level let several threads use one CQ or EP at once? */
static inline int ibf_threading_needs_lock(enum fi_threading threading)
{
	return threading != FI_THREAD_DOMAIN &&
	       threading != FI_THREAD_COMPLETION &&
	       threading != FI_THREAD_ENDPOINT;
}

/*
 * One posted work request.  Endpoints keep these in rings sized at creation;
 * wr_id points at the slot, so a completion finds its context without a
 * search and nothing is allocated per operation.  A queue completes in
 * order, so retiring a slot retires every slot before it (the unsignalled
 * sends among them).
 */
struct ibf_ring;
enum ibf_op_kind {
	IBF_OP_RING,		/* an endpoint's send or receive queue */
	IBF_OP_SRX,		/* a shared receive context's slot */
	IBF_OP_BOUNCE,		/* tagged mode: an eager receive buffer */
	IBF_OP_URECV,		/* tagged mode: an application's receive */
	IBF_OP_RDM,		/* an RDM endpoint's (struct ibf_rdm_op) */
	IBF_OP_REPLY,		/* tagged mode: a bounce's atomic answer send */
	IBF_OP_MATOMIC,		/* an FI_EP_MSG atomic awaiting its answer */
};
struct ibf_op {
	void *context;
	uint64_t flags;		/* FI_SEND | FI_MSG, FI_RMA | FI_WRITE, ... */
	size_t len;
	void *buf;
	struct ibf_ring *ring;	/* IBF_OP_RING */
	/* The wing's object the op belongs to, which core never reads: a
	 * shared receive context's slot its context, tagged mode's ops
	 * their endpoint (ibf_msg.h reads it with its type). */
	void *owner;
	enum ibf_op_kind kind;
	int user_comp;		/* the caller asked for a completion */
	uint32_t lkey;		/* FI_MULTI_RECV: to post the rest again */
	uint32_t slot;		/* IBF_OP_RING: its index in ring->ops */
	/* What a soft completion reports beyond the above (tagged mode). */
	uint64_t data, tag;
	size_t olen;
	int err;
	/* The device's status (enum ibv_wc_status) when a work request of
	 * the op failed, else 0: the error entry's prov_errno, which
	 * fi_cq_strerror names (an RDM op's error says why it failed). */
	int prov_errno;
	fi_addr_t src;		/* FI_SOURCE: the sender (RDM) */
	/* FI_EP_MSG: the counter its completion adds to, or NULL. */
	struct ibf_cntr *cntr;
	/* All but a ring's slot: what gives it back to its owner once its
	 * completion has been read (set by the wing that made it). */
	void (*release)(struct ibf_op *op);
};

struct ibf_ring {
	struct ibf_op *ops;
	uint32_t size;		/* a power of two */
	uint32_t head;		/* next slot to post; the poster's */
	uint32_t tail;		/* oldest slot not retired; the CQ's */
};

/* The poster reads tail, which the CQ reader writes: acquire/release. */
static inline uint32_t ibf_ring_free(struct ibf_ring *r)
{
	return r->size - (r->head - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE));
}

/* Make ops[0, size) the slots of r, empty. */
static inline void ibf_ring_set(struct ibf_ring *r, struct ibf_op *ops,
				uint32_t size)
{
	uint32_t i;

	r->ops = ops;
	r->size = size;
	r->head = r->tail = 0;
	for (i = 0; i < size; i++) {
		ops[i].ring = r;
		ops[i].slot = i;
		ops[i].kind = IBF_OP_RING;
	}
}

static inline void ibf_ring_retire(struct ibf_op *op)
{
	struct ibf_ring *r = op->ring;
	uint32_t idx = op->slot;	/* op - r->ops, without a division */
	uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);

	assert(idx < r->size && op == &r->ops[idx]);	/* a slot of this ring */
	/* Advance tail to just past idx, modulo the ring. */
	tail += ((idx - tail) & (r->size - 1)) + 1;
	__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
}

/* The completion of op has been read: its slot may be reused. */
static inline void ibf_op_release(struct ibf_op *op)
{
	if (likely(op->kind == IBF_OP_RING)) {
		ibf_ring_retire(op);
	} else {
		assert(op->release);	/* its owner said how */
		op->release(op);
	}
}

/* The completion queue and the counter: ibf_cq.h, ibf_cntr.h. */

/* ---- poll set (ibf_poll.c) ---- */
int ibf_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
		  struct fid_poll **poll);

/* ---- event queue ---- */
struct ibf_eq;
struct ibf_eq_entry;

/*
 * Whoever owns an rdma_cm id on an EQ's channel puts one of these in
 * id->context; the EQ hands it each event for that id to turn into EQ
 * entries (or none).  The event is acked by the EQ afterwards.
 */
struct ibf_cm_owner {
	void (*on_event)(struct ibf_cm_owner *owner, struct ibf_eq *eq,
			 struct rdma_cm_event *event);
};

struct ibf_eq {
	struct fid_eq eq_fid;
	struct ibf_fabric *fabric;
	struct rdma_event_channel *channel;
	struct ibf_waitfd wait;	/* channel + an eventfd raised while entries wait */
	enum fi_wait_obj wait_obj;
	pthread_mutex_t lock;	/* guards the entry list and CM progress */
	struct ibf_eq_entry *head, *tail;
	size_t count;
	void *err_data;		/* last readerr's data, ours until next read */
	int ref;		/* endpoints bound */
};

/* A connection request waiting for fi_endpoint or fi_reject: info->handle,
 * what an FI_CONNREQ entry carries (the EQ frees one never taken). */
struct ibf_connreq {
	struct fid fid;		/* FI_CLASS_CONNREQ */
	struct rdma_cm_id *id;
};

/* Queue an entry: event data, or an fi_eq_err_entry with IBF_EQ_ERR. */
#define IBF_EQ_ERR 1
#define IBF_EQ_CONNREQ 2	/* its fi_info and request are ours until read */
int ibf_eq_push(struct ibf_eq *eq, uint32_t event, const void *buf,
		size_t len, unsigned kind, const void *err_data,
		size_t err_data_size);
int ibf_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		struct fid_eq **eq, void *context);

/* ---- what every endpoint kind has (ibf_ep_base.c) ---- */

/* What a counter bound to an endpoint counts (fi_ep_bind flags). */
enum ibf_cntr_kind {
	IBF_CNTR_SEND,		/* FI_SEND */
	IBF_CNTR_RECV,		/* FI_RECV */
	IBF_CNTR_READ,		/* FI_READ */
	IBF_CNTR_WRITE,		/* FI_WRITE */
	IBF_CNTR_REMOTE_READ,	/* FI_REMOTE_READ (RDM) */
	IBF_CNTR_REMOTE_WRITE,	/* FI_REMOTE_WRITE (RDM) */
	IBF_CNTR_KINDS
};

struct ibf_ep_base;
/* An endpoint kind's part of fi_ep_bind and fi_control. */
struct ibf_ep_base_ops {
	const char *name;	/* "FI_EP_MSG": for warnings */
	const char *binds;	/* the classes it takes: for warnings */
	/* The counter kinds it counts: the first ncntr of enum
	 * ibf_cntr_kind (the rest are accepted and count nothing). */
	int ncntr;
	/* fi_ep_bind of a class other than a CQ or counter: 0, -FI_E*, or
	 * -FI_ENOSYS for a class the kind does not take. */
	int (*bind)(struct ibf_ep_base *b, struct fid *bfid, uint64_t flags);
	int (*enable)(struct ibf_ep_base *b);	/* FI_ENABLE */
};

/*
 * The start of every endpoint (struct ibf_ep, struct ibf_rdm_ep): its fid,
 * domain and info, the CQs and counters bound, its op flags, and whether
 * it is enabled.  fi_ep_bind and fi_control of the fid go to
 * ibf_ep_base_bind and ibf_ep_base_control, the same for every kind, with
 * the same errors: binding after fi_enable is -FI_EOPBADSTATE, no fid or
 * a class the kind does not take -FI_EINVAL, an unknown command
 * -FI_ENOSYS.
 */
struct ibf_ep_base {
	struct fid_ep ep_fid;
	const struct ibf_ep_base_ops *ops;
	struct ibf_domain *domain;
	struct fi_info *info;
	struct ibf_cq *tx_cq, *rx_cq;
	int tx_selective, rx_selective;	/* FI_SELECTIVE_COMPLETION */
	uint64_t tx_op_flags, rx_op_flags;
	int enabled;
	struct ibf_cntr *cntr[IBF_CNTR_KINDS];	/* bound, by what they count */
	int counted;	/* ibf_ep_base_has_cntr, kept at each bind: one load
			 * on the data path, where most endpoints have none */
};
int ibf_ep_base_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int ibf_ep_base_control(struct fid *fid, int command, void *arg);
/* Whether a counter is bound; whether one bound sleeps (FI_WAIT_*). */
int ibf_ep_base_has_cntr(const struct ibf_ep_base *b);
int ibf_ep_base_cntr_waits(const struct ibf_ep_base *b);
/* fi_enable: every counter bound progresses the endpoint through hook
 * and sleeps on fd (-1: none); all of them or, on failure, none. */
int ibf_ep_base_attach_cntrs(struct ibf_ep_base *b, struct ibf_progress *hook,
			     const int fd[2]);
/* Closing: the counters stop progressing the endpoint (any attached). */
void ibf_ep_base_detach_cntrs(struct ibf_ep_base *b, struct ibf_progress *hook);
/* The last step of every endpoint's close: it lets go of the CQs and
 * counters bound, its domain and its info (the kind frees itself). */
void ibf_ep_base_close(struct ibf_ep_base *b);

int ibf_eq_trywait(struct ibf_eq *eq);

#endif /* IBF_H */
