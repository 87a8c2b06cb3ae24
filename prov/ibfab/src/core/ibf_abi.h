/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The application's structs at the API version it opened the fabric with
 * (fi_fabric's attr->api_version).  libfabric's structs grow at their end
 * from one release to the next, and an application built against older
 * headers has the older size; ibfab may be built against newer ones.  So
 * whatever ibfab writes into (or reads from) such a struct goes through
 * here, and nothing past the caller's size is touched (libfabric's own
 * providers do the same with ofi_cq_err_memcpy).  An api of 0 means the
 * version ibfab was built for.
 */
#ifndef IBF_ABI_H
#define IBF_ABI_H

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

/* Whether the headers ibfab is built against are of major.minor or later
 * (what fields their structs have). */
#define IBF_HEADERS_GE(major, minor) \
	(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION) >= FI_VERSION(major, minor))

/* Whether the application's version is at least major.minor. */
static inline int ibf_api_ge(uint32_t api, int major, int minor)
{
	return !api || api >= (uint32_t)FI_VERSION(major, minor);
}

/*
 * Names libfabric 2.x deprecates (its headers warn on each use), with
 * their 1.x values: only callers below 2.0 send them, and ibfab must read
 * them whichever headers it is built against.
 */
#define IBF_MR_UNSPEC 0		/* FI_MR_UNSPEC */
#define IBF_MR_BASIC 1		/* FI_MR_BASIC */
#define IBF_MR_SCALABLE 2	/* FI_MR_SCALABLE */
#define IBF_LOCAL_MR (1ULL << 55)	/* FI_LOCAL_MR */
#define IBF_ORDER_NONE 0ULL	/* FI_ORDER_NONE */
#define IBF_ORDER_STRICT 0x1FFULL	/* FI_ORDER_STRICT */
#if FI_MAJOR_VERSION < 2
_Static_assert(IBF_MR_UNSPEC == FI_MR_UNSPEC && IBF_MR_BASIC == FI_MR_BASIC &&
	       IBF_MR_SCALABLE == FI_MR_SCALABLE && IBF_LOCAL_MR == FI_LOCAL_MR &&
	       IBF_ORDER_NONE == FI_ORDER_NONE && IBF_ORDER_STRICT == FI_ORDER_STRICT,
	       "libfabric 1.x's values");
#endif

/* Bytes of struct fi_cq_err_entry the application has. */
size_t ibf_cq_err_size(uint32_t api);
/* Hand error entry e to the application's *user: its size, and err_data
 * as fi_cq(3) says (from 1.5 the caller's buffer, which ibfab leaves
 * unfilled: it has no error data). */
void ibf_cq_err_copy(uint32_t api, struct fi_cq_err_entry *user,
		     const struct fi_cq_err_entry *e);
/* Bytes of struct fi_eq_err_entry the application has (err_data_size
 * came in 1.5). */
size_t ibf_eq_err_size(uint32_t api);
/* What fi_getinfo tells an application of version api, where the
 * meaning of an attribute changed between versions: called on each entry
 * last. */
void ibf_info_at_api(struct fi_info *info, uint32_t api);

#endif /* IBF_ABI_H */
