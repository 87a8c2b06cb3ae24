/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibft_rdm_churn: a long-lived RDM endpoint (a server) whose peers come and
 * go must stay the same size.
 *
 * S stays open on -s.  Each cycle, a client endpoint C opens on -d (a new
 * address each time), sends S a message, S answers it (inserting C's
 * address, removing it before C closes or after), and C closes.  After a
 * warm-up, the test counts S's process resources, runs the cycles, and
 * counts again: file descriptors, the devices' QPs and rdma_cm ids (from
 * "rdma resource show", if the tool is there) and heap bytes in use must
 * not have grown with the number of cycles.
 *
 *   ibft_rdm_churn -p PROV -s ADDR_S -d ADDR_C
 *
 * IBFT_CHURN_CYCLES (default 60) sets how many cycles are counted, e.g.
 * 100000 for a long run on hardware.
 */
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibft.h"
#include "ibft_rdm_node.h"

#define WARMUP 20

struct usage {
	long fds;
	long qps, cm_ids;	/* -1: no rdma tool */
	long heap;
};

static long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* The sum over devices of "NAME N" in "rdma resource show". */
static long rdma_count(const char *what)
{
	char line[512], key[32];
	long total = -1, v;
	const char *p;
	FILE *f = popen("rdma resource show 2>/dev/null", "r");

	if (!f)
		return -1;
	snprintf(key, sizeof(key), " %s ", what);
	while (fgets(line, sizeof(line), f)) {
		p = strstr(line, key);
		if (p && sscanf(p + strlen(key), "%ld", &v) == 1)
			total = (total < 0 ? 0 : total) + v;
	}
	pclose(f);
	return total;
}

static void measure(struct usage *u)
{
	struct mallinfo2 mi = mallinfo2();

	u->fds = count_fds();
	u->qps = rdma_count("qp");
	u->cm_ids = rdma_count("cm_id");
	u->heap = (long)mi.uordblks;
}

/* Wait for n's completion of ctx; 0, or -1 on error or timeout. */
static int wait_for(struct node *n, void *ctx)
{
	struct comp c = { 0 };

	while (!wait_comp(n, &c, WAIT_MS))
		if (c.e.op_context == ctx)
			return c.err ? -1 : 0;
	return -1;
}

/* One client's life: open, talk to S both ways, close.  S forgets the
 * client before it closes, or (late) after. */
static int cycle(struct node *s, struct node *c, fi_addr_t s_in_c, int late)
{
	uint8_t ping[16] = "ping", pong[16] = "pong", in_s[16], in_c[16];
	fi_addr_t c_in_s = FI_ADDR_NOTAVAIL;

	if (node_ep_open(c, 0, NULL, NULL) ||
	    fi_recv(s->ep, in_s, sizeof(in_s), NULL, FI_ADDR_UNSPEC, in_s) ||
	    fi_recv(c->ep, in_c, sizeof(in_c), NULL, FI_ADDR_UNSPEC, in_c) ||
	    POST(fi_send(c->ep, ping, sizeof(ping), NULL, s_in_c, ping)) ||
	    wait_for(s, in_s) || wait_for(c, ping) ||
	    fi_av_insert(s->av, c->name, 1, &c_in_s, 0, NULL) != 1 ||
	    POST(fi_send(s->ep, pong, sizeof(pong), NULL, c_in_s, pong)) ||
	    wait_for(c, in_c) || wait_for(s, pong) ||
	    memcmp(in_s, ping, sizeof(ping)) || memcmp(in_c, pong, sizeof(pong)))
		return -1;
	if (!late && fi_av_remove(s->av, &c_in_s, 1, 0))
		return -1;
	fi_close(&c->ep->fid);
	c->ep = NULL;
	if (late) {
		idle(s, 20);
		if (fi_av_remove(s->av, &c_in_s, 1, 0))
			return -1;
	}
	return 0;
}

/* Progress S until what its dead peers held has been let go. */
static void settle(struct node *s)
{
	idle(s, 500);
}

int main(int argc, char **argv)
{
	const char *env = getenv("IBFT_CHURN_CYCLES");
	long cycles = env ? atol(env) : 60, i;
	struct usage before, after;
	struct node *s, *c;
	fi_addr_t s_in_c;
	int ok = 1;

	ibft_parse(argc, argv, "S's address (-s), the clients' (-d)");
	if (!ibft_opts.src || !ibft_opts.dst) {
		fprintf(stderr, "ibft_rdm_churn needs -s ADDR_S -d ADDR_C\n");
		return 2;
	}
	s = node_open(0, FI_MSG, 0);
	c = node_open(1, FI_MSG, 0);
	if (!s || !c || fi_av_insert(c->av, s->name, 1, &s_in_c, 0, NULL) != 1)
		goto out;
	for (i = 0; i < WARMUP && ok; i++)
		ok = !cycle(s, c, s_in_c, i % 2);
	IBFT_CHECK(ok, "churn-cycles-work", "warm-up cycle %ld failed", i);
	if (!ok)
		goto out;
	settle(s);
	measure(&before);
	for (i = 0; i < cycles && ok; i++)
		ok = !cycle(s, c, s_in_c, i % 2);
	IBFT_CHECK(ok, "churn-cycles-work", "cycle %ld of %ld failed", i, cycles);
	if (!ok)
		goto out;
	settle(s);
	measure(&after);
	printf("# %ld cycles: fds %ld -> %ld, QPs %ld -> %ld, cm_ids %ld -> %ld, "
	       "heap %ld -> %ld bytes\n", cycles, before.fds, after.fds,
	       before.qps, after.qps, before.cm_ids, after.cm_ids, before.heap,
	       after.heap);
	IBFT_CHECK(after.fds <= before.fds, "churn-fds-flat",
		   "%ld file descriptors after %ld cycles, %ld before", after.fds,
		   cycles, before.fds);
	if (before.qps < 0) {
		printf("skip - churn-qps-flat: no rdma tool to count QPs\n");
	} else {
		/* A few may still be on their way out. */
		IBFT_CHECK(after.qps <= before.qps + 2, "churn-qps-flat",
			   "%ld QPs after %ld cycles, %ld before", after.qps,
			   cycles, before.qps);
		IBFT_CHECK(after.cm_ids <= before.cm_ids + 2, "churn-cm-ids-flat",
			   "%ld rdma_cm ids after %ld cycles, %ld before",
			   after.cm_ids, cycles, before.cm_ids);
	}
	/* Slack for allocator noise, far below what a leak of a record and
	 * a QP per cycle would add. */
	IBFT_CHECK(after.heap - before.heap <= 32 * 1024 + 64 * cycles,
		   "churn-heap-flat", "heap in use grew by %ld bytes over %ld "
		   "cycles", after.heap - before.heap, cycles);
out:
	close_all();
	return ibft_finish();
}
