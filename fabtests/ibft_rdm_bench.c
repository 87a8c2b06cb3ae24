/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM benchmarks for any provider: tagged ping-pong latency,
 * streaming bandwidth, and the memory an endpoint spends per connected
 * peer.  A second process (this program again) is the peer, on -d.
 *
 *   ibft_rdm_bench -p PROV -s ADDR0 -d ADDR1 -t lat|bw|mem -m SIZE -n ITERS
 *
 * Output, for util/ibfab-bench:
 *   RESULT rdm_lat SIZE MIN_USEC MEDIAN_USEC   (half round trips)
 *   RESULT rdm_bw SIZE MIB_PER_SEC
 *   RESULT mem_per_peer PEERS KIB_PER_PEER
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ibft_rdm_node.h"

#define WINDOW 64
#define MEM_PEERS 8

/* Wait for n completions of node nd; any error ends the run. */
static int reap(struct node *nd, int n)
{
	struct comp c = { 0 };

	while (n-- > 0) {
		if (wait_comp(nd, &c, WAIT_MS) || c.err) {
			fprintf(stderr, "completion: %s\n", c.err ?
				fi_strerror(c.err) : "timed out");
			return -1;
		}
	}
	return 0;
}

static int lat_side(struct node *nd, fi_addr_t peer, int initiator)
{
	size_t size = ibft_opts.max_size;
	int i, n = ibft_opts.iters, warm = 10;
	uint8_t *s = xbuf(size), *r = xbuf(size);
	double *rtt = calloc(n, sizeof(double)), t0;
	int ret = -1;

	if (!rtt)
		return -1;
	memset(s, 1, size);
	for (i = -warm; i < n; i++) {
		if (POST(fi_trecv(nd->ep, r, size, NULL, FI_ADDR_UNSPEC, 1, 0, r)))
			goto out;
		t0 = ibft_now_us();
		if (initiator) {
			if (POST(fi_tsend(nd->ep, s, size, NULL, peer, 1, s)) ||
			    reap(nd, 2))
				goto out;
			if (i >= 0)
				rtt[i] = ibft_now_us() - t0;
		} else {
			if (reap(nd, 1) || POST(fi_tsend(nd->ep, s, size, NULL, peer, 1, s)) ||
			    reap(nd, 1))
				goto out;
		}
	}
	if (initiator) {
		qsort(rtt, n, sizeof(double), ibft_cmp_double);
		printf("RESULT rdm_lat %zu %.2f %.2f\n", size, rtt[0] / 2,
		       rtt[n / 2] / 2);
	}
	ret = 0;
out:
	free(rtt);
	if (!ret) {	/* after an error a receive may still be posted to r */
		free(s);
		free(r);
	}
	return ret;
}

/* WINDOW sends, then the receiver's one-word answer; n / WINDOW rounds. */
static int bw_side(struct node *nd, fi_addr_t peer, int initiator)
{
	size_t size = ibft_opts.max_size;
	int rounds = IBFT_MIN(ibft_opts.iters / WINDOW + 1, 1000), i, k;
	uint8_t *buf = xbuf(size), ack[4] = { 0 };
	double t0 = 0;

	memset(buf, 2, size);
	for (i = -1; i < rounds; i++) {	/* round -1 warms up */
		if (i == 0)
			t0 = ibft_now_us();
		if (initiator) {
			if (POST(fi_trecv(nd->ep, ack, sizeof(ack), NULL,
					  FI_ADDR_UNSPEC, 9, 0, ack)))
				return -1;
			for (k = 0; k < WINDOW; k++)
				if (POST(fi_tsend(nd->ep, buf, size, NULL, peer, 2, buf)))
					return -1;
			if (reap(nd, WINDOW + 1))
				return -1;
		} else {
			for (k = 0; k < WINDOW; k++)
				if (POST(fi_trecv(nd->ep, buf, size, NULL,
						  FI_ADDR_UNSPEC, 2, 0, buf)))
					return -1;
			if (reap(nd, WINDOW) ||
			    POST(fi_tsend(nd->ep, ack, sizeof(ack), NULL, peer, 9, ack)) ||
			    reap(nd, 1))
				return -1;
		}
	}
	if (initiator)
		printf("RESULT rdm_bw %zu %.4g\n", size, (double)rounds * WINDOW *
		       size / ((ibft_now_us() - t0) / 1e6) / (1 << 20));
	free(buf);
	return 0;
}

/* The child side of "mem": MEM_PEERS endpoints, each taking a message. */
static int mem_child(int in, int out)
{
	struct node *ns[MEM_PEERS];
	uint8_t r[MEM_PEERS][16];
	char x;
	int i;

	for (i = 0; i < MEM_PEERS; i++) {
		if (!(ns[i] = node_open(1, FI_TAGGED, 0)) ||
		    xwrite(out, &ns[i]->namelen, sizeof(size_t)) ||
		    xwrite(out, ns[i]->name, ns[i]->namelen))
			return 1;
		fi_trecv(ns[i]->ep, r[i], sizeof(r[i]), NULL, FI_ADDR_UNSPEC, 3, 0, r[i]);
	}
	for (i = 0; i < MEM_PEERS; i++)
		if (reap(ns[i], 1))
			return 1;
	xread(in, &x, 1);	/* until the parent has measured */
	close_all();
	return 0;
}

/* Resident memory of one endpoint before and after connecting to peers. */
static int mem_parent(struct node *nd, struct child *ch)
{
	uint8_t peer[64], m[16] = "hi";
	fi_addr_t fa[MEM_PEERS];
	long before, after;
	size_t plen;
	int i;

	for (i = 0; i < MEM_PEERS; i++)
		if (xread(ch->from, &plen, sizeof(plen)) || plen > sizeof(peer) ||
		    xread(ch->from, peer, plen) ||
		    fi_av_insert(nd->av, peer, 1, &fa[i], 0, NULL) != 1)
			return -1;
	before = ibft_rss_kib();
	for (i = 0; i < MEM_PEERS; i++)
		if (POST(fi_tsend(nd->ep, m, sizeof(m), NULL, fa[i], 3, m)))
			return -1;
	if (reap(nd, MEM_PEERS))
		return -1;
	after = ibft_rss_kib();
	printf("RESULT mem_per_peer %d %.1f\n", MEM_PEERS,
	       (double)(after - before) / MEM_PEERS);
	xwrite(ch->to, "d", 1);
	return 0;
}

static int child_main(int in, int out)
{
	struct node *nd;
	uint8_t peer[64];
	size_t plen;
	fi_addr_t fa;

	if (!strcmp(ibft_opts.test, "mem"))
		return mem_child(in, out);
	nd = node_open(1, FI_TAGGED, 0);
	if (!nd || swap_names(nd, in, out, peer, &plen) ||
	    fi_av_insert(nd->av, peer, 1, &fa, 0, NULL) != 1)
		return 1;
	if (!strcmp(ibft_opts.test, "lat") ? lat_side(nd, fa, 0) : bw_side(nd, fa, 0))
		return 1;
	close_all();
	return 0;
}

int main(int argc, char **argv)
{
	struct child ch;
	struct node *nd;
	uint8_t peer[64];
	size_t plen;
	fi_addr_t fa;
	int ret, st;

	ibft_parse(argc, argv, "(-s ADDR0 -d ADDR1 -t lat|bw|mem)");
	ibft_argv = argv;
	if (!ibft_opts.src || !ibft_opts.test) {
		fprintf(stderr, "ibft_rdm_bench needs -s and -t\n");
		return 2;
	}
	if (getenv("IBFT_RDM_CHILD"))
		return child_main(3, 4);
	if (spawn(&ch, "bench") || !(nd = node_open(0, FI_TAGGED, 0)))
		return 1;
	if (!strcmp(ibft_opts.test, "mem")) {
		ret = mem_parent(nd, &ch);
	} else {
		ret = swap_names(nd, ch.from, ch.to, peer, &plen) ||
		      fi_av_insert(nd->av, peer, 1, &fa, 0, NULL) != 1;
		if (!ret)
			ret = !strcmp(ibft_opts.test, "lat") ? lat_side(nd, fa, 1) :
			      bw_side(nd, fa, 1);
	}
	close_all();
	close(ch.to);
	close(ch.from);
	waitpid(ch.pid, &st, 0);
	return ret || !WIFEXITED(st) || WEXITSTATUS(st);
}
