/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_MSG tagged mode (run by ibft_msg -t tagged): messages sent before
 * any receive is posted wait, then match by tag (with ignore bits) in
 * posting order, apart from untagged ones; truncation is FI_ETRUNC;
 * fi_cancel takes a posted receive back.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibft_msg.h"

#define TG_LEN 100

/* One tagged completion, or the error behind -FI_EAVAIL in *err. */
static int tg_wait(struct ibft_conn *c, struct fi_cq_tagged_entry *e,
		   struct fi_cq_err_entry *err)
{
	ssize_t ret;
	int spins = 0;

	do {
		ret = fi_cq_read(c->cq, e, 1);
		if (ret == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			fi_cq_readerr(c->cq, err, 0);
			return -FI_EAVAIL;
		}
		if (ret == -FI_EAGAIN && ++spins % 1000 == 0)
			usleep(100);
	} while (ret == -FI_EAGAIN && spins < 20000000);
	return (int)ret;
}

static int tg_recv_check(struct ibft_conn *c, struct ibft_buf *b, int tagged,
			 uint64_t tag, uint64_t ignore, unsigned seed,
			 uint64_t want_tag, const char *name)
{
	struct fi_cq_tagged_entry e = { 0 };
	struct fi_cq_err_entry err = { 0 };
	ssize_t ret;

	memset(b->ptr, 0, TG_LEN);
	ret = tagged ? fi_trecv(c->ep, b->ptr, TG_LEN, b->desc, 0, tag, ignore, b) :
		       fi_recv(c->ep, b->ptr, TG_LEN, b->desc, 0, b);
	if (ret || tg_wait(c, &e, &err) != 1)
		return IBFT_CHECK(0, name, "post %zd, or no completion", ret);
	return IBFT_CHECK(e.op_context == b && e.len == TG_LEN &&
			  (e.flags & (tagged ? FI_TAGGED : FI_MSG)) &&
			  (!tagged || e.tag == want_tag) &&
			  ibft_verify(b->ptr, TG_LEN, seed), name,
			  "context %p len %zu flags %#llx tag %#llx",
			  e.op_context, e.len, (unsigned long long)e.flags,
			  (unsigned long long)e.tag);
}

/* Whether the provider offers FI_TAGGED on FI_EP_MSG; says skip if not. */
int tagged_offered(const char *test)
{
	struct fi_info *hints = ibft_msg_hints_addr(), *info = NULL;
	int ret;

	hints->caps = FI_MSG | FI_TAGGED;
	ret = fi_getinfo(FI_VERSION(1, 17), ibft_opts.server ? ibft_opts.src :
			 ibft_opts.dst, ibft_opts.port, ibft_opts.server ? FI_SOURCE : 0,
			 hints, &info);
	fi_freeinfo(hints);
	fi_freeinfo(info);
	if (ret == -FI_ENODATA)
		printf("skip - %s [%s]: no FI_TAGGED on FI_EP_MSG\n", test,
		       ibft_opts.prov);
	return ret != -FI_ENODATA;
}

void tagged(void)
{
	static const struct { uint64_t tag; int tagged; size_t len; } sends[] = {
		{ 0x100, 1, TG_LEN }, { 0x200, 1, TG_LEN }, { 0, 0, TG_LEN },
		{ 0x101, 1, TG_LEN }, { 0x300, 1, TG_LEN }, { 0x400, 1, 2 * TG_LEN },
	};
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = { 0 };
	struct ibft_buf b;
	struct ibft_conn c;
	size_t i;
	int ret;

	if (!tagged_offered("tagged"))
		return;
	copts.tagged = 1;
	if (!IBFT_EXPECT(ibft_connect(&c, &copts), 0, "tagged-connect"))
		goto out;
	if (ibft_buf_alloc(&c, &b, 4 * TG_LEN, FI_SEND | FI_RECV))
		goto out;
	if (!ibft_opts.server) {
		for (i = 0; i < sizeof(sends) / sizeof(sends[0]); i++) {
			ibft_fill(b.ptr, sends[i].len, (unsigned)i + 1);
			ret = (int)(sends[i].tagged ?
				    (sends[i].tag == 0x300 ?
				     fi_tsenddata(c.ep, b.ptr, sends[i].len, b.desc, 77, 0,
						  sends[i].tag, &b) :
				     fi_tsend(c.ep, b.ptr, sends[i].len, b.desc, 0,
					      sends[i].tag, &b)) :
				    fi_send(c.ep, b.ptr, sends[i].len, b.desc, 0, &b));
			/* Sends complete with no receive posted: they wait there. */
			if (ret || tg_wait(&c, &e, &err) != 1 || e.op_context != &b)
				break;
		}
		IBFT_CHECK(i == sizeof(sends) / sizeof(sends[0]), "tagged-sends-complete",
			   "send %zu failed (%d)", i, ret);
		/* The server's word that its receive for 0x500 is posted. */
		IBFT_CHECK(fi_recv(c.ep, b.ptr, TG_LEN, b.desc, 0, &c) == 0 &&
			   tg_wait(&c, &e, &err) == 1 && e.op_context == &c,
			   "tagged-ready", "no word from the server");
		ibft_fill(b.ptr, TG_LEN, 9);
		IBFT_CHECK(fi_tsend(c.ep, b.ptr, TG_LEN, b.desc, 0, 0x500, &b) == 0 &&
			   tg_wait(&c, &e, &err) == 1, "tagged-send-expected", "failed");
		IBFT_CHECK(fi_recv(c.ep, b.ptr, TG_LEN, b.desc, 0, &c) == 0 &&
			   tg_wait(&c, &e, &err) == 1, "tagged-end", "no end");
		goto close;
	}
	/* A receive taken back completes with FI_ECANCELED, once. */
	{
		struct fi_context cancel_ctx;

		ret = (int)fi_trecv(c.ep, b.ptr, TG_LEN, b.desc, 0, 0x600, 0, &cancel_ctx);
		IBFT_EXPECT(ret == 0 ? fi_cancel(&c.ep->fid, &cancel_ctx) : ret, 0,
			    "tagged-cancel");
		IBFT_CHECK(tg_wait(&c, &e, &err) == -FI_EAVAIL &&
			   err.err == FI_ECANCELED && err.op_context == &cancel_ctx &&
			   (err.flags & FI_RECV), "tagged-cancel-completion",
			   "err %d context %p", err.err, err.op_context);
		IBFT_EXPECT(fi_cq_readerr(c.cq, &err, 0), -FI_EAGAIN,
			    "tagged-cancel-once");
	}
	usleep(500000);	/* everything the client sends arrives unexpected */
	tg_recv_check(&c, &b, 1, 0x200, 0, 2, 0x200, "tagged-match-out-of-order");
	tg_recv_check(&c, &b, 0, 0, 0, 3, 0, "tagged-untagged-apart");
	tg_recv_check(&c, &b, 1, 0x100, 0xf, 1, 0x100, "tagged-ignore-first-in-order");
	tg_recv_check(&c, &b, 1, 0x100, 0xf, 4, 0x101, "tagged-ignore-next");
	memset(&e, 0, sizeof(e));
	IBFT_CHECK(fi_trecv(c.ep, b.ptr, TG_LEN, b.desc, 0, 0x300, 0, &b) == 0 &&
		   tg_wait(&c, &e, &err) == 1 && (e.flags & FI_REMOTE_CQ_DATA) &&
		   e.data == 77 && e.tag == 0x300, "tagged-remote-cq-data",
		   "flags %#llx data %llu", (unsigned long long)e.flags,
		   (unsigned long long)e.data);
	ret = (int)fi_trecv(c.ep, b.ptr, TG_LEN, b.desc, 0, 0x400, 0, &b);
	IBFT_CHECK(!ret && tg_wait(&c, &e, &err) == -FI_EAVAIL &&
		   err.err == FI_ETRUNC && err.olen == TG_LEN && err.op_context == &b &&
		   err.tag == 0x400, "tagged-truncation", "err %d olen %zu",
		   err.err, err.olen);
	/* A receive posted first, the message after. */
	ret = (int)fi_trecv(c.ep, b.ptr, TG_LEN, b.desc, 0, 0x500, 0, &b);
	ibft_fill(b.ptr + 2 * TG_LEN, 8, 0);
	IBFT_CHECK(!ret && fi_send(c.ep, b.ptr + 2 * TG_LEN, 8, b.desc, 0, &c) == 0,
		   "tagged-ready", "post %d", ret);
	for (i = 0; i < 2; i++) {	/* the ready send's, and the receive's */
		if (tg_wait(&c, &e, &err) != 1)
			break;
		if (e.op_context == &b)
			IBFT_CHECK(e.tag == 0x500 && ibft_verify(b.ptr, TG_LEN, 9),
				   "tagged-match-on-arrival", "tag %#llx",
				   (unsigned long long)e.tag);
	}
	IBFT_CHECK(fi_send(c.ep, b.ptr, 8, b.desc, 0, &c) == 0 &&
		   tg_wait(&c, &e, &err) == 1, "tagged-end", "no end");
close:
	ibft_buf_free(&b);
out:
	ibft_close(&c);
}
