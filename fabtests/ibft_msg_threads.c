/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_MSG with FI_THREAD_SAFE (run by ibft_msg -t threads): the client's
 * threads send at once on one endpoint while another reads the CQ; every
 * message arrives once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ibft_msg.h"

#define THREADS 3
#define PER_THREAD 400

struct sender {
	struct ibft_conn *c;
	struct ibft_buf *b;
	int id, posted, failed;
};

static volatile int senders_done;

static void *send_thread(void *arg)
{
	struct sender *s = arg;
	uint32_t *slot = (uint32_t *)(s->b->ptr + s->id * 64);
	ssize_t ret;
	int i;

	for (i = 0; i < PER_THREAD; i++) {
		/* Each message says who sent it and which it was. */
		slot[0] = (uint32_t)s->id;
		slot[1] = (uint32_t)i;
		do {
			ret = fi_inject(s->c->ep, slot, 8, 0);
		} while (ret == -FI_EAGAIN);
		if (ret) {
			s->failed++;
			break;
		}
		s->posted++;
	}
	__atomic_add_fetch(&senders_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Injects complete silently, but their slots come back through the CQ. */
static void *reap_thread(void *arg)
{
	struct ibft_conn *c = arg;
	struct fi_cq_data_entry e[16];

	while (__atomic_load_n(&senders_done, __ATOMIC_ACQUIRE) < THREADS)
		fi_cq_read(c->cq, e, 16);
	return NULL;
}

void threads(struct ibft_conn *c)
{
	struct ibft_buf b;
	struct fi_cq_data_entry e = { 0 };
	int total = THREADS * PER_THREAD, i, got = 0, bad = 0;

	if (ibft_buf_alloc(c, &b, (size_t)total * 8 + THREADS * 64,
			   FI_SEND | FI_RECV)) {
		IBFT_CHECK(0, "threads-buffers", "registration failed");
		return;
	}
	if (ibft_opts.server) {
		static int seen[THREADS][PER_THREAD];
		int posted = 0;

		/* Post as many receives as fit, and more as they complete. */
		while (got < total) {
			while (posted < total &&
			       !fi_recv(c->ep, b.ptr + (size_t)posted * 8, 8, b.desc, 0,
					b.ptr + (size_t)posted * 8))
				posted++;
			if (ibft_cq_wait(c, &e, 1, 0, 30000) != 1)
				break;
			{
				uint32_t *m = e.op_context;

				if (m[0] >= THREADS || m[1] >= PER_THREAD || seen[m[0]][m[1]]++)
					bad++;
			}
			got++;
		}
		for (i = 0; i < THREADS * PER_THREAD; i++)
			bad += seen[i / PER_THREAD][i % PER_THREAD] != 1;
		IBFT_CHECK(got == total && !bad, "threads-every-message-once",
			   "%d of %d arrived, %d missing or doubled", got, total, bad);
		IBFT_EXPECT(ibft_ctl_send(c, &b, "end", 4), 0, "threads-end");
	} else {
		struct sender s[THREADS];
		pthread_t t[THREADS], r;

		pthread_create(&r, NULL, reap_thread, c);
		for (i = 0; i < THREADS; i++) {
			s[i] = (struct sender){ .c = c, .b = &b, .id = i };
			pthread_create(&t[i], NULL, send_thread, &s[i]);
		}
		for (i = 0; i < THREADS; i++) {
			pthread_join(t[i], NULL);
			got += s[i].posted;
			bad += s[i].failed;
		}
		pthread_join(r, NULL);
		IBFT_CHECK(got == total && !bad, "threads-all-posted",
			   "%d of %d posted, %d failed", got, total, bad);
		IBFT_EXPECT(ibft_ctl_recv(c, &b, b.ptr, 4), 0, "threads-end");
	}
	ibft_buf_free(&b);
}
