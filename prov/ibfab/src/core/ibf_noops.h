/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibf_noops.c: what an endpoint does not support answers -FI_ENOSYS, so a
 * call outside its capabilities never jumps to NULL.  (The fid-level
 * ones, ibf_no_bind and the like, are in ibf_util.h.)
 */
#ifndef IBF_NOOPS_H
#define IBF_NOOPS_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

extern struct fi_ops_tagged ibf_no_tagged_ops;
extern struct fi_ops_rma ibf_no_rma_ops;
ssize_t ibf_no_cancel(fid_t fid, void *context);
int ibf_no_ctx(struct fid_ep *sep, int index, void *attr, struct fid_ep **ep,
	       void *context);
ssize_t ibf_no_size_left(struct fid_ep *ep);
int ibf_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen);
int ibf_no_connect(struct fid_ep *ep, const void *addr, const void *param,
		   size_t paramlen);
int ibf_no_listen(struct fid_pep *pep);
int ibf_no_accept(struct fid_ep *ep, const void *param, size_t paramlen);
int ibf_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
		  size_t paramlen);
int ibf_no_shutdown(struct fid_ep *ep, uint64_t flags);
int ibf_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
		struct fid_mc **mc, void *context);
ssize_t ibf_no_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		    fi_addr_t dest_addr, void *context);
ssize_t ibf_no_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
		     size_t count, fi_addr_t dest_addr, void *context);
ssize_t ibf_no_sendmsg(struct fid_ep *ep, const struct fi_msg *msg,
		       uint64_t flags);
ssize_t ibf_no_inject(struct fid_ep *ep, const void *buf, size_t len,
		      fi_addr_t dest_addr);
ssize_t ibf_no_senddata(struct fid_ep *ep, const void *buf, size_t len,
			void *desc, uint64_t data, fi_addr_t dest_addr,
			void *context);
ssize_t ibf_no_injectdata(struct fid_ep *ep, const void *buf, size_t len,
			  uint64_t data, fi_addr_t dest_addr);

#endif /* IBF_NOOPS_H */
