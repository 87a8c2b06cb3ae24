/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Operation tables for what an endpoint does not support, so that a call
 * outside its capabilities answers -FI_ENOSYS instead of jumping to NULL.
 */
#include "config.h"

#include "ibf.h"
#include "ibf_noops.h"

static ssize_t ibf_no_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			    fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
			    void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_trecvv(struct fid_ep *ep, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t src_addr,
			     uint64_t tag, uint64_t ignore, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			       uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_tsend(struct fid_ep *ep, const void *buf, size_t len,
			    void *desc, fi_addr_t dest_addr, uint64_t tag,
			    void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_tsendv(struct fid_ep *ep, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t dest_addr,
			     uint64_t tag, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			       uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_tinject(struct fid_ep *ep, const void *buf, size_t len,
			      fi_addr_t dest_addr, uint64_t tag)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_tsenddata(struct fid_ep *ep, const void *buf, size_t len,
				void *desc, uint64_t data, fi_addr_t dest_addr,
				uint64_t tag, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_tinjectdata(struct fid_ep *ep, const void *buf, size_t len,
				  uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	return -FI_ENOSYS;
}

struct fi_ops_tagged ibf_no_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = ibf_no_trecv,
	.recvv = ibf_no_trecvv,
	.recvmsg = ibf_no_trecvmsg,
	.send = ibf_no_tsend,
	.sendv = ibf_no_tsendv,
	.sendmsg = ibf_no_tsendmsg,
	.inject = ibf_no_tinject,
	.senddata = ibf_no_tsenddata,
	.injectdata = ibf_no_tinjectdata,
};

ssize_t ibf_no_cancel(fid_t fid, void *context)
{
	return -FI_ENOSYS;
}

int ibf_no_ctx(struct fid_ep *sep, int index, void *attr, struct fid_ep **ep,
	       void *context)
{
	return -FI_ENOSYS;
}

ssize_t ibf_no_size_left(struct fid_ep *ep)
{
	return -FI_ENOSYS;
}

int ibf_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	return -FI_ENOSYS;
}

int ibf_no_connect(struct fid_ep *ep, const void *addr, const void *param,
		   size_t paramlen)
{
	return -FI_ENOSYS;
}

int ibf_no_listen(struct fid_pep *pep)
{
	return -FI_ENOSYS;
}

int ibf_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

int ibf_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
		  size_t paramlen)
{
	return -FI_ENOSYS;
}

int ibf_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	return -FI_ENOSYS;
}

int ibf_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
		struct fid_mc **mc, void *context)
{
	return -FI_ENOSYS;
}

/* Sends, for a receive-only context. */
ssize_t ibf_no_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		    fi_addr_t dest_addr, void *context)
{
	return -FI_ENOSYS;
}

ssize_t ibf_no_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
		     size_t count, fi_addr_t dest_addr, void *context)
{
	return -FI_ENOSYS;
}

ssize_t ibf_no_sendmsg(struct fid_ep *ep, const struct fi_msg *msg,
		       uint64_t flags)
{
	return -FI_ENOSYS;
}

ssize_t ibf_no_inject(struct fid_ep *ep, const void *buf, size_t len,
		      fi_addr_t dest_addr)
{
	return -FI_ENOSYS;
}

ssize_t ibf_no_senddata(struct fid_ep *ep, const void *buf, size_t len,
			void *desc, uint64_t data, fi_addr_t dest_addr,
			void *context)
{
	return -FI_ENOSYS;
}

ssize_t ibf_no_injectdata(struct fid_ep *ep, const void *buf, size_t len,
			  uint64_t data, fi_addr_t dest_addr)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
			   fi_addr_t src_addr, uint64_t addr, uint64_t key,
			   void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_readv(struct fid_ep *ep, const struct iovec *iov,
			    void **desc, size_t count, fi_addr_t src_addr,
			    uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			      uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_write(struct fid_ep *ep, const void *buf, size_t len,
			    void *desc, fi_addr_t dest_addr, uint64_t addr,
			    uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_writedata(struct fid_ep *ep, const void *buf, size_t len,
				void *desc, uint64_t data, fi_addr_t dest_addr,
				uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_rma_inject(struct fid_ep *ep, const void *buf, size_t len,
				 fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	return -FI_ENOSYS;
}

static ssize_t ibf_no_rma_injectdata(struct fid_ep *ep, const void *buf,
				     size_t len, uint64_t data,
				     fi_addr_t dest_addr, uint64_t addr,
				     uint64_t key)
{
	return -FI_ENOSYS;
}

/* RMA on RDM endpoints comes with the one-sided work; until then: ENOSYS. */
struct fi_ops_rma ibf_no_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = ibf_no_read,
	.readv = ibf_no_readv,
	.readmsg = ibf_no_readmsg,
	.write = ibf_no_write,
	.writev = ibf_no_readv,
	.writemsg = ibf_no_readmsg,
	.inject = ibf_no_rma_inject,
	.writedata = ibf_no_writedata,
	.injectdata = ibf_no_rma_injectdata,
};
