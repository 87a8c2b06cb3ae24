/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * fi_info templates and hint matching.  Pure functions of their arguments:
 * no device is touched here, so the unit tests cover all of it.
 *
 * A template holds a device's maxima (queue depths, iov counts, inline
 * size).  ibf_info_match() decides whether hints can be met and says which
 * hint cannot; ibf_info_narrow() then turns the maxima into the values the
 * caller gets: what the hints asked for, or ibfab's defaults.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibf.h"
#include "ibf_abi.h"
#include "ibf_atomic_ops.h"

#define IBF_TX_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_SEND | \
		     FI_READ | FI_WRITE)
#define IBF_RX_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_RECV | \
		     FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV)
/* What makes an FI_EP_MSG endpoint frame its messages (ibf_msg_tagged.c). */
#define IBF_MSG_FRAMED_CAPS (FI_TAGGED | FI_ATOMIC)

struct fi_info *ibf_info_template(const struct ibf_dev_limits *lim,
				  const struct sockaddr *src)
{
	struct fi_info *info = fi_allocinfo();

	if (!info)
		return NULL;
	info->caps = IBF_MSG_CAPS;
	info->mode = IBF_RX_MODE;
	info->addr_format = ibf_addr_format(src);
	info->src_addrlen = ibf_addr_len(src);
	info->src_addr = malloc(info->src_addrlen);
	info->domain_attr->name = strdup(lim->dev_name);
	info->fabric_attr->name = strdup(lim->fabric_name);
	if (!info->src_addr || !info->domain_attr->name ||
	    !info->fabric_attr->name) {
		fi_freeinfo(info);
		return NULL;
	}
	memcpy(info->src_addr, src, info->src_addrlen);
	info->fabric_attr->prov_version = IBF_PROV_VERSION;

	info->tx_attr->caps = IBF_TX_CAPS;
	info->tx_attr->msg_order = IBF_MSG_ORDER;
	info->tx_attr->comp_order = IBF_ORDER_STRICT;
	info->tx_attr->inject_size = lim->max_inline;
	info->tx_attr->size = lim->max_qp_wr;
	info->tx_attr->iov_limit = lim->max_sge;
	info->tx_attr->rma_iov_limit = 1;

	info->rx_attr->caps = IBF_RX_CAPS;
	info->rx_attr->mode = IBF_RX_MODE;
	info->rx_attr->msg_order = IBF_MSG_ORDER;
	info->rx_attr->comp_order = IBF_ORDER_STRICT;
	info->rx_attr->size = lim->max_qp_wr;
	info->rx_attr->iov_limit = lim->max_sge;

	info->ep_attr->type = FI_EP_MSG;
	info->ep_attr->protocol = FI_PROTO_RDMA_CM_IB_RC;
	info->ep_attr->protocol_version = 1;
	info->ep_attr->max_msg_size = lim->max_msg_sz;
	info->ep_attr->max_order_raw_size = lim->max_msg_sz;
	info->ep_attr->max_order_waw_size = lim->max_msg_sz;
	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;

	info->domain_attr->caps = IBF_DOMAIN_CAPS;
	info->domain_attr->threading = FI_THREAD_SAFE;
	info->domain_attr->control_progress = FI_PROGRESS_AUTO;
	info->domain_attr->data_progress = FI_PROGRESS_AUTO;
	info->domain_attr->resource_mgmt = FI_RM_ENABLED;
	info->domain_attr->av_type = FI_AV_UNSPEC;
	info->domain_attr->mr_mode = IBF_MR_MODE;
	info->domain_attr->mr_key_size = IBF_MR_KEY_SIZE;
	info->domain_attr->cq_data_size = IBF_CQ_DATA_SIZE;
	info->domain_attr->cq_cnt = lim->max_cq;
	/* Counters are the provider's own: as many as CQs, to be sane. */
	info->domain_attr->cntr_cnt = lim->max_cq;
	info->domain_attr->ep_cnt = lim->max_qp;
	info->domain_attr->tx_ctx_cnt = lim->max_qp;
	info->domain_attr->rx_ctx_cnt = lim->max_qp;
	info->domain_attr->max_ep_tx_ctx = 1;
	info->domain_attr->max_ep_rx_ctx = 1;
	info->domain_attr->max_ep_srx_ctx = lim->max_srq ? 1 : 0;
	info->domain_attr->mr_iov_limit = 1;
	info->domain_attr->mr_cnt = lim->max_mr;
	return info;
}

#define IBF_RDM_TX_CAPS (FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | \
			 FI_READ | FI_WRITE)
#define IBF_RDM_RX_CAPS (FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | \
			 FI_SOURCE | FI_MULTI_RECV | FI_RMA | FI_ATOMIC | \
			 FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT)
/* The caps that expose memory to peers, and so need keys and addresses. */
#define IBF_RDM_RMA_CAPS (FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | \
			  FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT)
/*
 * Messages from one endpoint to one peer are taken in order (one RC QP),
 * and so are atomics: each is one request, applied by the target as it
 * arrives (ibf_rdm_atomic.c).  Nothing orders RMA, whose RDMA lands when
 * the HCA places it, against anything.
 */
#define IBF_RDM_ORDER (FI_ORDER_SAS | FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | \
		       FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW)
/* Given only to those who ask: they change what receives match, or what
 * each RMA sends its target (FI_RMA_EVENT). */
#define IBF_RDM_ASKED_CAPS (FI_DIRECTED_RECV | FI_SOURCE | FI_RMA_EVENT)

static int ibf_is_rdm(const struct fi_info *info)
{
	return info->ep_attr->type == FI_EP_RDM;
}

/*
 * FI_EP_RDM (ibf_rdm_*.c): messages, tags and RMA over connections made on
 * demand.  Local buffers never need registration: eager messages are
 * copied, large ones registered by ibfab.  Memory a peer reads or writes
 * is registered by the application (fi_mr_reg), with the device's keys
 * and virtual addresses: mr_mode IBF_RDM_RMA_MR_MODE when RMA is given,
 * 0 for messaging alone.  Data moves when the CQ is read
 * (FI_PROGRESS_MANUAL, the default) or, if asked, also by a thread.
 */
struct fi_info *ibf_info_template_rdm(const struct ibf_dev_limits *lim,
				      const struct sockaddr *src)
{
	struct fi_info *info = ibf_info_template(lim, src);

	if (!info)
		return NULL;
	info->caps = IBF_RDM_TX_CAPS | IBF_RDM_RX_CAPS | IBF_DOMAIN_CAPS |
		     FI_SHARED_AV;
	info->mode = 0;
	info->domain_attr->caps |= FI_SHARED_AV;
	info->tx_attr->caps = IBF_RDM_TX_CAPS;
	info->tx_attr->msg_order = IBF_RDM_ORDER;
	info->tx_attr->comp_order = IBF_ORDER_NONE;
	info->tx_attr->inject_size = ibf_params.eager_size;
	info->tx_attr->size = IBF_MIN(lim->max_qp_wr, 16384);
	info->tx_attr->iov_limit = IBF_MIN(lim->max_sge, IBF_RDM_IOV_LIMIT);
	info->tx_attr->rma_iov_limit = 1;
	info->rx_attr->caps = IBF_RDM_RX_CAPS;
	info->rx_attr->mode = 0;
	info->rx_attr->msg_order = IBF_RDM_ORDER;
	info->rx_attr->comp_order = IBF_ORDER_NONE;
	info->rx_attr->size = IBF_MIN(lim->max_qp_wr, 16384);
	info->rx_attr->iov_limit = IBF_MIN(lim->max_sge, IBF_RDM_IOV_LIMIT);
	info->ep_attr->type = FI_EP_RDM;
	/* Large messages are read in pieces of the port's max_msg_sz. */
	info->ep_attr->max_msg_size = IBF_RDM_MAX_MSG_SIZE;
	/* Atomics are ordered whole: up to what one request carries. */
	info->ep_attr->max_order_raw_size = ibf_atomic_max(ibf_params.eager_size,
							   FI_UINT8, 0);
	info->ep_attr->max_order_war_size = info->ep_attr->max_order_raw_size;
	info->ep_attr->max_order_waw_size = info->ep_attr->max_order_raw_size;
	info->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;	/* FI_TAG_GENERIC */
	info->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	info->domain_attr->mr_mode = IBF_RDM_RMA_MR_MODE;
	info->domain_attr->cq_data_size = IBF_RDM_CQ_DATA_SIZE;
	info->domain_attr->max_ep_srx_ctx = 0;
	return info;
}

/* Say which hint cannot be met; always -FI_ENODATA. */
static int __attribute__((format(printf, 3, 4)))
ibf_nomatch(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return -FI_ENODATA;
}

/* Old-style FI_MR_BASIC: local registration is asked for through mode. */
static int ibf_hints_mr_basic(uint32_t version, const struct fi_info *hints)
{
	int mr_mode = hints->domain_attr->mr_mode;

	return mr_mode == IBF_MR_BASIC ||
	       (mr_mode == IBF_MR_UNSPEC && FI_VERSION_LT(version, FI_VERSION(1, 5)));
}

/*
 * What registration must look like for these hints.  Remote keys and
 * addresses matter only to RMA: without it, local registration is all.
 */
static uint64_t ibf_mr_mode_needed(const struct fi_info *hints)
{
	uint64_t primary = hints ? hints->caps & IBF_MSG_PRIMARY_CAPS : 0;

	if (primary && !(primary & (FI_RMA | FI_READ | FI_WRITE |
				    FI_REMOTE_READ | FI_REMOTE_WRITE)))
		return FI_MR_LOCAL | FI_MR_ALLOCATED;
	return IBF_MR_MODE;
}

static int ibf_match_mr_mode(uint32_t version, const struct fi_info *hints,
			     char *why, size_t why_len)
{
	int mr_mode = hints->domain_attr->mr_mode;
	uint64_t need = ibf_mr_mode_needed(hints);

	if (mr_mode == IBF_MR_SCALABLE)
		return ibf_nomatch(why, why_len, "mr_mode FI_MR_SCALABLE: verbs keys are chosen by the "
			    "device; ask for FI_MR_PROV_KEY");
	if (ibf_hints_mr_basic(version, hints)) {
		if (!(hints->mode & IBF_LOCAL_MR))
			return ibf_nomatch(why, why_len, "mr_mode FI_MR_BASIC without mode FI_LOCAL_MR: "
				    "ibfab needs local buffers registered");
		return 0;
	}
	if (!ibf_bits_subset(need, (uint64_t)mr_mode))
		return ibf_nomatch(why, why_len, "mr_mode %#x lacks %#llx: ibfab needs FI_MR_LOCAL | "
			    "FI_MR_ALLOCATED, and FI_MR_VIRT_ADDR | FI_MR_PROV_KEY "
			    "for RMA", mr_mode,
			    (unsigned long long)(need & ~(uint64_t)mr_mode));
	return 0;
}

/*
 * RDM takes any mr_mode: local buffers never need registering, and remote
 * ones are named by the device's keys and virtual addresses when the
 * application takes both, else by keys it chooses and offsets
 * (ibf_rdm_mr_mode).
 */
static int ibf_rdm_prov_keys_ok(uint32_t version, const struct fi_info *hints)
{
	int mr_mode;

	if (!hints->domain_attr || ibf_hints_mr_basic(version, hints))
		return 1;	/* FI_MR_BASIC is virtual addresses, device keys */
	mr_mode = hints->domain_attr->mr_mode;
	return mr_mode != IBF_MR_SCALABLE &&
	       ibf_bits_subset(IBF_RDM_RMA_MR_MODE, (uint64_t)mr_mode);
}

/* The mr_mode of an RDM answer with RMA or atomics, in the caller's
 * dialect: the device's keys and virtual addresses when the hints allow
 * them, else requested keys and offsets (FI_MR_ALLOCATED if allowed). */
static int ibf_rdm_mr_mode(uint32_t version, const struct fi_info *hints)
{
	int mr_mode = hints->domain_attr->mr_mode;

	if (ibf_hints_mr_basic(version, hints))
		return IBF_MR_BASIC;
	if (mr_mode == IBF_MR_SCALABLE)
		return IBF_MR_SCALABLE;
	if (ibf_rdm_prov_keys_ok(version, hints) && !ibf_params.rdm_requested_keys)
		return IBF_RDM_RMA_MR_MODE;
	return mr_mode & FI_MR_ALLOCATED;
}

static int ibf_match_ep(const struct fi_info *tmpl, const struct fi_ep_attr *h,
			char *why, size_t why_len)
{
	const struct fi_ep_attr *t = tmpl->ep_attr;
	char name[IBF_ENUM_STR];

	if (h->type != FI_EP_UNSPEC && h->type != t->type)
		return ibf_nomatch(why, why_len, "ep_type %s: ibfab offers FI_EP_MSG and "
			    "FI_EP_RDM", ibf_enum_str(name, sizeof(name),
						      FI_TYPE_EP_TYPE, h->type));
	if (t->type == FI_EP_RDM && h->rx_ctx_cnt == FI_SHARED_CONTEXT)
		return ibf_nomatch(why, why_len, "rx_ctx_cnt FI_SHARED_CONTEXT: an RDM endpoint "
			    "shares its receive buffers among all its peers already");
	if (h->protocol != FI_PROTO_UNSPEC && h->protocol != t->protocol)
		return ibf_nomatch(why, why_len, "protocol %s: ibfab speaks FI_PROTO_RDMA_CM_IB_RC",
			    ibf_enum_str(name, sizeof(name), FI_TYPE_PROTOCOL,
					 (int)h->protocol));
	if (h->max_msg_size > t->max_msg_size)
		return ibf_nomatch(why, why_len, "max_msg_size %zu exceeds the port's %zu",
			    h->max_msg_size, t->max_msg_size);
	if (h->rx_ctx_cnt == FI_SHARED_CONTEXT && !tmpl->domain_attr->max_ep_srx_ctx)
		return ibf_nomatch(why, why_len, "rx_ctx_cnt FI_SHARED_CONTEXT: the device has no SRQ");
	if (h->tx_ctx_cnt > 1 || (h->rx_ctx_cnt > 1 && h->rx_ctx_cnt != FI_SHARED_CONTEXT))
		return ibf_nomatch(why, why_len, "tx/rx_ctx_cnt %zu/%zu: no scalable contexts "
			    "or shared transmit contexts", h->tx_ctx_cnt, h->rx_ctx_cnt);
	if (h->auth_key_size)
		return ibf_nomatch(why, why_len, "auth_key: not supported");
	return 0;
}

static int ibf_match_domain(const struct fi_info *tmpl, uint32_t version,
			    const struct fi_info *hints, char *why, size_t why_len)
{
	const struct fi_domain_attr *t = tmpl->domain_attr, *h = hints->domain_attr;

	if (h->name && strcmp(h->name, t->name))
		return ibf_nomatch(why, why_len, "domain name %s is not %s", h->name, t->name);
	if (h->caps & ~t->caps)
		return ibf_nomatch(why, why_len, "domain caps %#llx not supported",
			    (unsigned long long)(h->caps & ~(t->caps | IBF_DOMAIN_CAPS)));
	if (h->cq_data_size > t->cq_data_size)
		return ibf_nomatch(why, why_len, "cq_data_size %zu exceeds %zu", h->cq_data_size,
			    t->cq_data_size);
	if (h->mr_iov_limit > t->mr_iov_limit)
		return ibf_nomatch(why, why_len, "mr_iov_limit %zu exceeds %zu", h->mr_iov_limit,
			    t->mr_iov_limit);
	if (h->cq_cnt > t->cq_cnt || h->ep_cnt > t->ep_cnt)
		return ibf_nomatch(why, why_len, "cq_cnt %zu / ep_cnt %zu exceed the device's %zu / %zu",
			    h->cq_cnt, h->ep_cnt, t->cq_cnt, t->ep_cnt);
	if (h->max_ep_tx_ctx > 1 || h->max_ep_rx_ctx > 1 || h->max_ep_stx_ctx ||
	    h->max_ep_srx_ctx > t->max_ep_srx_ctx)
		return ibf_nomatch(why, why_len, "domain asks for several or shared transmit "
			    "contexts per endpoint");
	if (h->auth_key_size)
		return ibf_nomatch(why, why_len, "auth_key: not supported");
	if (ibf_is_rdm(tmpl))
		return 0;	/* any: ibf_rdm_mr_mode */
	return ibf_match_mr_mode(version, hints, why, why_len);
}

static int ibf_match_tx(const struct fi_tx_attr *t, const struct fi_tx_attr *h,
			char *why, size_t why_len)
{
	/* Domain caps belong to info->caps; tolerate them here too. */
	if (h->caps & ~(t->caps | IBF_DOMAIN_CAPS))
		return ibf_nomatch(why, why_len, "tx caps %#llx not supported",
			    (unsigned long long)(h->caps & ~(t->caps | IBF_DOMAIN_CAPS)));
	if (h->op_flags & ~IBF_TX_OP_FLAGS)
		return ibf_nomatch(why, why_len, "tx op_flags %#llx not supported",
			    (unsigned long long)(h->op_flags & ~IBF_TX_OP_FLAGS));
	if (h->msg_order & ~t->msg_order)
		return ibf_nomatch(why, why_len, "tx msg_order %#llx not supported",
			    (unsigned long long)(h->msg_order & ~t->msg_order));
	if (h->comp_order & ~IBF_ORDER_STRICT)
		return ibf_nomatch(why, why_len, "tx comp_order %#llx not supported",
			    (unsigned long long)h->comp_order);
	if (h->inject_size > t->inject_size)
		return ibf_nomatch(why, why_len, "inject_size %zu exceeds the device's inline limit %zu",
			    h->inject_size, t->inject_size);
	if (h->size > t->size)
		return ibf_nomatch(why, why_len, "tx size %zu exceeds the device's %zu", h->size, t->size);
	if (h->iov_limit > t->iov_limit)
		return ibf_nomatch(why, why_len, "tx iov_limit %zu exceeds the device's %zu",
			    h->iov_limit, t->iov_limit);
	if (h->rma_iov_limit > t->rma_iov_limit)
		return ibf_nomatch(why, why_len, "rma_iov_limit %zu exceeds %zu", h->rma_iov_limit,
			    t->rma_iov_limit);
	return 0;
}

static int ibf_match_rx(const struct fi_rx_attr *t, const struct fi_rx_attr *h,
			char *why, size_t why_len)
{
	if (h->caps & ~(t->caps | IBF_DOMAIN_CAPS))
		return ibf_nomatch(why, why_len, "rx caps %#llx not supported",
			    (unsigned long long)(h->caps & ~(t->caps | IBF_DOMAIN_CAPS)));
	if (h->op_flags & ~IBF_RX_OP_FLAGS)
		return ibf_nomatch(why, why_len, "rx op_flags %#llx not supported",
			    (unsigned long long)(h->op_flags & ~IBF_RX_OP_FLAGS));
	if (h->msg_order & ~t->msg_order)
		return ibf_nomatch(why, why_len, "rx msg_order %#llx not supported",
			    (unsigned long long)(h->msg_order & ~t->msg_order));
	if (h->comp_order & ~IBF_ORDER_STRICT)
		return ibf_nomatch(why, why_len, "rx comp_order %#llx not supported",
			    (unsigned long long)h->comp_order);
	if (h->total_buffered_recv && !(t->caps & FI_DIRECTED_RECV))
		return ibf_nomatch(why, why_len, "total_buffered_recv %zu: ibfab buffers no receives on "
			    "FI_EP_MSG", h->total_buffered_recv);
	if (h->size > t->size)
		return ibf_nomatch(why, why_len, "rx size %zu exceeds the device's %zu", h->size, t->size);
	if (h->iov_limit > t->iov_limit)
		return ibf_nomatch(why, why_len, "rx iov_limit %zu exceeds the device's %zu",
			    h->iov_limit, t->iov_limit);
	return 0;
}

/* Can the caller take remote CQ data, which consumes posted receives? */
static int ibf_hints_rx_cq_data(const struct fi_info *hints)
{
	return !hints || (hints->mode & FI_RX_CQ_DATA) ||
	       (hints->rx_attr && (hints->rx_attr->mode & FI_RX_CQ_DATA));
}

/*
 * 0 when the template can meet the hints; otherwise -FI_ENODATA and "why"
 * names the first hint that cannot be met.
 */
int ibf_info_match(const struct fi_info *tmpl, uint32_t version,
		   const struct fi_info *hints, char *why, size_t why_len)
{
	char fmt[2][IBF_ENUM_STR];
	int ret;

	if (!hints)
		return 0;
	if (hints->caps & ~tmpl->caps)
		return ibf_nomatch(why, why_len, "caps %#llx not supported",
			    (unsigned long long)(hints->caps & ~tmpl->caps));
	/* FI_SOCKADDR asks for any struct sockaddr: IPv4 and IPv6 both are. */
	if (hints->addr_format != FI_FORMAT_UNSPEC &&
	    hints->addr_format != FI_SOCKADDR &&
	    hints->addr_format != tmpl->addr_format)
		return ibf_nomatch(why, why_len, "addr_format %s: this address is %s",
			    ibf_enum_str(fmt[0], sizeof(fmt[0]), FI_TYPE_ADDR_FORMAT,
					 (int)hints->addr_format),
			    ibf_enum_str(fmt[1], sizeof(fmt[1]), FI_TYPE_ADDR_FORMAT,
					 (int)tmpl->addr_format));
	if (hints->fabric_attr && hints->fabric_attr->name &&
	    strcmp(hints->fabric_attr->name, tmpl->fabric_attr->name))
		return ibf_nomatch(why, why_len, "fabric name %s is not %s", hints->fabric_attr->name,
			    tmpl->fabric_attr->name);
	if (hints->ep_attr &&
	    (ret = ibf_match_ep(tmpl, hints->ep_attr, why, why_len)))
		return ret;
	if ((hints->caps & IBF_MSG_FRAMED_CAPS) && hints->ep_attr &&
	    !ibf_is_rdm(tmpl) &&
	    hints->ep_attr->max_msg_size > ibf_params.eager_size)
		return ibf_nomatch(why, why_len, "max_msg_size %zu with FI_TAGGED "
			    "or FI_ATOMIC: such FI_EP_MSG endpoints carry at most "
			    "FI_IBFAB_EAGER_SIZE (%zu) bytes",
			    hints->ep_attr->max_msg_size, ibf_params.eager_size);
	if (hints->domain_attr &&
	    (ret = ibf_match_domain(tmpl, version, hints, why, why_len)))
		return ret;
	if (hints->tx_attr &&
	    (ret = ibf_match_tx(tmpl->tx_attr, hints->tx_attr, why, why_len)))
		return ret;
	if (hints->rx_attr &&
	    (ret = ibf_match_rx(tmpl->rx_attr, hints->rx_attr, why, why_len)))
		return ret;
	if (hints->domain_attr && hints->domain_attr->cq_data_size &&
	    !ibf_is_rdm(tmpl) && !ibf_hints_rx_cq_data(hints))
		return ibf_nomatch(why, why_len, "cq_data_size %zu needs mode FI_RX_CQ_DATA: remote CQ "
			    "data consumes a posted receive",
			    hints->domain_attr->cq_data_size);
	return 0;
}

static size_t ibf_pick(size_t hint, size_t dflt, size_t max)
{
	if (hint)
		return hint;
	return dflt && dflt < max ? dflt : max;
}

/*
 * A primary cap asked with none of its directions has them all
 * (fi_getinfo(3): FI_RMA alone is FI_READ | FI_WRITE | FI_REMOTE_READ |
 * FI_REMOTE_WRITE), and the answer says so: an application binds counters
 * by the directions fi_getinfo returned, and passes the answer back as
 * hints.
 */
static uint64_t ibf_caps_directions(uint64_t caps, uint64_t offered)
{
	const uint64_t msg_dir = FI_SEND | FI_RECV;
	const uint64_t rma_dir = FI_READ | FI_WRITE | FI_REMOTE_READ |
				 FI_REMOTE_WRITE;

	if ((caps & (FI_MSG | FI_TAGGED)) && !(caps & msg_dir))
		caps |= offered & msg_dir;
	if ((caps & (FI_RMA | FI_ATOMIC)) && !(caps & rma_dir))
		caps |= offered & rma_dir;
	return caps;
}

/* Primary caps as asked, secondary caps as offered. */
static uint64_t ibf_narrow_caps(uint64_t offered, uint64_t asked)
{
	if (!(asked & IBF_MSG_PRIMARY_CAPS))
		return offered;
	return ibf_caps_directions(asked & offered, offered) |
	       (offered & IBF_MSG_SECONDARY_CAPS);
}

/*
 * FI_TAGGED and FI_ATOMIC change how an FI_EP_MSG endpoint works (its
 * messages are framed: ibf_msg_tagged.c), so they are offered only to those
 * who ask; they get framing's message size limit with them.
 */
static void ibf_narrow_tagged(struct fi_info *info, const struct fi_info *hints)
{
	uint64_t framed = hints ? hints->caps & IBF_MSG_FRAMED_CAPS : 0;

	if (ibf_is_rdm(info))
		return;
	info->caps &= ~(IBF_MSG_FRAMED_CAPS & ~framed);
	info->tx_attr->caps &= ~(IBF_MSG_FRAMED_CAPS & ~framed);
	info->rx_attr->caps &= ~(IBF_MSG_FRAMED_CAPS & ~framed);
	if (!framed)
		return;
	info->caps &= ~FI_MULTI_RECV;
	info->rx_attr->caps &= ~FI_MULTI_RECV;
	info->ep_attr->max_msg_size = ibf_params.eager_size;
	info->ep_attr->max_order_raw_size = 0;
	info->ep_attr->max_order_waw_size = 0;
	if (framed & FI_TAGGED)	/* FI_TAG_GENERIC */
		info->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
}

/* The domain attributes a caller may choose. */
static void ibf_narrow_domain(struct fi_info *info, const struct fi_domain_attr *hd)
{
	if (hd->threading != FI_THREAD_UNSPEC)
		info->domain_attr->threading = hd->threading;
	if (hd->control_progress != FI_PROGRESS_UNSPEC)
		info->domain_attr->control_progress = hd->control_progress;
	if (hd->data_progress != FI_PROGRESS_UNSPEC)
		info->domain_attr->data_progress = hd->data_progress;
	if (hd->av_type != FI_AV_UNSPEC)
		info->domain_attr->av_type = hd->av_type;
}

/* RDM caps: what was asked (or everything), FI_DIRECTED_RECV and
 * FI_SOURCE only if asked. */
static uint64_t ibf_narrow_rdm_caps(uint64_t offered, uint64_t asked)
{
	if (!(asked & IBF_MSG_PRIMARY_CAPS))
		return (offered & ~IBF_RDM_ASKED_CAPS) | (asked & offered);
	return ibf_caps_directions(asked & offered, offered) |
	       (offered & IBF_DOMAIN_CAPS);
}

static int ibf_narrow_rdm(struct fi_info *info, uint32_t version,
			  const struct fi_info *hints)
{
	const struct fi_domain_attr *hd = hints->domain_attr;

	info->caps = ibf_narrow_rdm_caps(info->caps, hints->caps);
	info->tx_attr->caps = ibf_narrow_rdm_caps(info->tx_attr->caps,
						  hints->caps & info->tx_attr->caps);
	info->rx_attr->caps = ibf_narrow_rdm_caps(info->rx_attr->caps,
						  hints->caps & info->rx_attr->caps);
	if (hints->tx_attr)
		info->tx_attr->op_flags = hints->tx_attr->op_flags;
	if (hints->rx_attr)
		info->rx_attr->op_flags = hints->rx_attr->op_flags;
	if (!hd)
		return 0;
	ibf_narrow_domain(info, hd);
	/* Local registration is never needed; say so in the caller's
	 * dialect. */
	if (info->caps & IBF_RDM_RMA_CAPS)
		info->domain_attr->mr_mode = ibf_rdm_mr_mode(version, hints);
	else if (ibf_hints_mr_basic(version, hints))
		info->domain_attr->mr_mode = IBF_MR_BASIC;
	else if (hd->mr_mode == IBF_MR_SCALABLE)
		info->domain_attr->mr_mode = IBF_MR_SCALABLE;
	else
		info->domain_attr->mr_mode = 0;
	return 0;
}

/* Turn a matched template into the answer: maxima become chosen values
 * (ibf_info_narrow adds the caller's version's terms). */
static int ibf_info_narrow_to(struct fi_info *info, uint32_t version,
			      const struct fi_info *hints)
{
	const struct fi_tx_attr *htx = hints ? hints->tx_attr : NULL;
	const struct fi_rx_attr *hrx = hints ? hints->rx_attr : NULL;
	const struct fi_domain_attr *hd = hints ? hints->domain_attr : NULL;
	struct fi_tx_attr *tx = info->tx_attr;
	struct fi_rx_attr *rx = info->rx_attr;

	tx->size = ibf_pick(htx ? htx->size : 0, ibf_params.tx_size, tx->size);
	/*
	 * An RDM receive is a software entry until a message matches it, and
	 * MPI libraries keep thousands posted (a full queue would stall them
	 * inside MPI_Irecv): its default is larger than a queue pair's.
	 */
	rx->size = ibf_pick(hrx ? hrx->size : 0, ibf_is_rdm(info) ?
			    IBF_RDM_RX_SIZE : ibf_params.rx_size, rx->size);
	tx->iov_limit = ibf_pick(htx ? htx->iov_limit : 0,
				 ibf_params.tx_iov_limit, tx->iov_limit);
	rx->iov_limit = ibf_pick(hrx ? hrx->iov_limit : 0,
				 ibf_params.rx_iov_limit, rx->iov_limit);
	tx->inject_size = ibf_pick(htx ? htx->inject_size : 0,
				   ibf_params.inline_size, tx->inject_size);
	ibf_narrow_tagged(info, hints);
	if (!hints)
		return 0;

	if (ibf_is_rdm(info))
		return ibf_narrow_rdm(info, version, hints);
	info->caps = ibf_narrow_caps(info->caps, hints->caps);
	tx->caps = ibf_narrow_caps(tx->caps, hints->caps & tx->caps);
	rx->caps = ibf_narrow_caps(rx->caps, hints->caps & rx->caps);
	if (htx && htx->caps)
		tx->caps = ibf_narrow_caps(tx->caps, htx->caps);
	if (hrx && hrx->caps)
		rx->caps = ibf_narrow_caps(rx->caps, hrx->caps);
	if (htx)
		tx->op_flags = htx->op_flags;
	if (hrx)
		rx->op_flags = hrx->op_flags;

	if (hints->ep_attr && hints->ep_attr->rx_ctx_cnt == FI_SHARED_CONTEXT)
		info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	if (!ibf_hints_rx_cq_data(hints)) {
		info->mode &= ~FI_RX_CQ_DATA;
		rx->mode &= ~FI_RX_CQ_DATA;
		info->domain_attr->cq_data_size = 0;
	}
	if (!hd)
		return 0;
	ibf_narrow_domain(info, hd);
	if (ibf_hints_mr_basic(version, hints)) {
		info->domain_attr->mr_mode = IBF_MR_BASIC;
		info->mode |= IBF_LOCAL_MR;
	} else {
		info->domain_attr->mr_mode = (int)ibf_mr_mode_needed(hints);
	}
	return 0;
}

/* Turn a matched template into the answer: maxima become chosen values,
 * in the caller's version's terms. */
int ibf_info_narrow(struct fi_info *info, uint32_t version,
		    const struct fi_info *hints)
{
	int ret = ibf_info_narrow_to(info, version, hints);

	ibf_info_at_api(info, version);
	return ret;
}
