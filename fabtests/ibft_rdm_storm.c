/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibft_rdm_storm: a connection storm.  P processes open an RDM endpoint
 * each (on -s and -d alternately), learn every address, and at one signal
 * each sends one message to every other: P * (P - 1) first sends to peers
 * no connection leads to yet, all at once, as an MPI job's first
 * all-to-all makes them.
 *
 *   ibft_rdm_storm -p PROV -s ADDR0 [-d ADDR1] -n P    (P: 2 to 64)
 *
 * The check passes when every send and every receive completes without
 * error, each process getting one message from each other process, within
 * IBFT_STORM_TIMEOUT seconds (default 90).  It also prints what the storm
 * cost, as a line for util/ibfab-bench:
 *
 *   storm P=8 last_ms=... failed=0 of=112 silent=0 rss_mib=... reg_mib=... qps=...
 *
 * last_ms: from the signal to the last completion of any process; failed:
 * sends and receives that did not complete (errors and time-outs, all of
 * a process that never reported: silent, stuck in a call);
 * rss_mib: resident memory per process after the storm (mean); reg_mib:
 * registered bytes per process, and qps: queue pairs per process, both
 * from the kernel's count ("rdma resource show", when the tool is there;
 * -1 otherwise), read while every endpoint is still open.
 */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ibft.h"
#include "ibft_rdm_node.h"

#define MAX_PROCS 64
#define MSG_LEN 64

/* What a process tells the parent after the storm. */
struct storm_report {
	double last_us;		/* its last completion (CLOCK_MONOTONIC) */
	int sends_ok, recvs_ok;	/* completed without error */
	int errors;		/* error completions and refused posts */
	int wrong;		/* a message from no peer, or one twice */
	long rss_kib;		/* resident after the storm */
};

static int storm_timeout_ms(void)
{
	const char *s = getenv("IBFT_STORM_TIMEOUT");

	return (s ? atoi(s) : 90) * 1000;
}

/* Post a send, driving progress while the provider says "again". */
static int send_to(struct node *n, fi_addr_t to, void *buf, void *ctx,
		   long deadline)
{
	ssize_t ret;

	while ((ret = fi_send(n->ep, buf, MSG_LEN, NULL, to, ctx)) == -FI_EAGAIN &&
	       now_ms() < deadline)
		poll_all();
	return (int)ret;
}

/* Post this process's sends and read completions until all are in or the
 * deadline passes. */
static void storm(struct node *n, int me, int procs, fi_addr_t *addr,
		  struct storm_report *r)
{
	static uint8_t tx[MAX_PROCS][MSG_LEN];
	long deadline = now_ms() + storm_timeout_ms();
	int seen[MAX_PROCS] = { 0 };
	int i, to, from, want = procs - 1;
	struct comp c = { 0 };

	/* Each starts with its next neighbour: every peer is asked at once. */
	for (i = 1; i < procs; i++) {
		to = (me + i) % procs;
		snprintf((char *)tx[to], MSG_LEN, "storm from %d", me);
		if (send_to(n, addr[to], tx[to], tx[to], deadline))
			r->errors++;
	}
	while (r->sends_ok + r->recvs_ok + r->errors < 2 * want &&
	       !wait_comp(n, &c, (int)(deadline - now_ms()))) {
		if (c.err) {
			r->errors++;
			continue;
		}
		r->last_us = ibft_now_us();
		if (!(c.e.flags & FI_RECV)) {
			r->sends_ok++;
			continue;
		}
		r->recvs_ok++;
		/* The context is the buffer (buf is only multi-receive's). */
		if (sscanf((char *)c.e.op_context, "storm from %d", &from) != 1 ||
		    from < 0 || from >= procs || from == me || seen[from]++)
			r->wrong++;
	}
}

/* One process of the storm; the parent talks to it on fds 3 and 4. */
static int storm_child(int me)
{
	static uint8_t rx[MAX_PROCS][MSG_LEN];
	struct storm_report r = { 0 };
	fi_addr_t addr[MAX_PROCS];
	uint8_t name[64];
	size_t len;
	int procs, i, ok = 1;
	struct node *n;
	char go;

	n = node_open(me, FI_MSG, 0);
	if (!n || xwrite(4, &n->namelen, sizeof(size_t)) ||
	    xwrite(4, n->name, n->namelen) || xread(3, &procs, sizeof(procs)) ||
	    procs < 2 || procs > MAX_PROCS)
		return 1;
	for (i = 0; ok && i < procs; i++) {
		ok = !xread(3, &len, sizeof(len)) && len <= sizeof(name) &&
		     !xread(3, name, len) &&
		     fi_av_insert(n->av, name, 1, &addr[i], 0, NULL) == 1;
	}
	for (i = 0; ok && i < procs - 1; i++)
		ok = !POST(fi_recv(n->ep, rx[i], MSG_LEN, NULL, FI_ADDR_UNSPEC,
				   rx[i]));
	if (!ok || xwrite(4, "R", 1) || xread(3, &go, 1))
		return 1;
	storm(n, me, procs, addr, &r);
	r.rss_kib = ibft_rss_kib();
	/* Stay open until the parent has counted the kernel's resources. */
	if (xwrite(4, &r, sizeof(r)) || xread(3, &go, 1))
		return 1;
	close_all();
	return 0;
}

/* The kernel names a resource by the thread that made it (a provider's
 * connection thread makes QPs): is tid one of process pid's threads? */
static int thread_of(long tid, pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%ld/task/%ld", (long)pid, tid);
	return access(path, F_OK) == 0;
}

/* Sum "KEY N" (or count the lines, with KEY "") over the lines of "rdma
 * resource show WHAT" made by the storm's processes; -1 without the tool. */
static long rdma_sum(const char *what, const char *key,
		     const struct child *ch, int procs)
{
	char cmd[64], line[1024], k[40];
	long total = -1, v, pid;
	const char *p;
	FILE *f;
	int i;

	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null", what);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	snprintf(k, sizeof(k), " %s ", key);
	while (fgets(line, sizeof(line), f)) {
		p = strstr(line, " pid ");
		if (!p || sscanf(p + 5, "%ld", &pid) != 1)
			continue;
		for (i = 0; i < procs && !thread_of(pid, ch[i].pid); i++)
			;
		if (i == procs)
			continue;
		if (total < 0)
			total = 0;
		if (!*key)
			total++;
		else if ((p = strstr(line, k)) && sscanf(p + strlen(k), "%ld", &v) == 1)
			total += v;
	}
	if (pclose(f) != 0 && total < 0)
		return -1;
	return total < 0 ? 0 : total;
}

/* xread with a deadline (now_ms() clock): -1 on error or time-out. */
static int xread_by(int fd, void *p, size_t len, long deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long left = deadline - now_ms();

	if (left <= 0 || poll(&pfd, 1, (int)left) != 1)
		return -1;
	return xread(fd, p, len);
}

/* Wait for the children to exit, killing those that have not by the
 * deadline; returns how many did not exit 0 by themselves. */
static int reap(struct child *ch, int procs, long deadline)
{
	int i, status, left = procs, bad = 0;
	pid_t pid;

	while (left && now_ms() < deadline) {
		for (i = 0; i < procs; i++) {
			if (ch[i].pid <= 0)
				continue;
			pid = waitpid(ch[i].pid, &status, WNOHANG);
			if (pid != ch[i].pid)
				continue;
			if (!WIFEXITED(status) || WEXITSTATUS(status))
				bad++;
			ch[i].pid = 0;
			left--;
		}
		if (left)
			usleep(10000);
	}
	for (i = 0; i < procs; i++) {
		if (ch[i].pid <= 0)
			continue;
		kill(ch[i].pid, SIGKILL);
		waitpid(ch[i].pid, &status, 0);
		bad++;
	}
	return bad;
}

/* Start the processes and give each every name; 0 or -1. */
static int gather(struct child *ch, int procs)
{
	static uint8_t names[MAX_PROCS][64];
	size_t lens[MAX_PROCS];
	long deadline = now_ms() + 120000;	/* opening, on a slow CPU */
	int i, j;
	char role[24];

	for (i = 0; i < procs; i++) {
		snprintf(role, sizeof(role), "storm:%d", i);
		if (spawn(&ch[i], role))
			return -1;
	}
	for (i = 0; i < procs; i++)
		if (xread_by(ch[i].from, &lens[i], sizeof(size_t), deadline) ||
		    lens[i] > sizeof(names[i]) ||
		    xread_by(ch[i].from, names[i], lens[i], deadline))
			return -1;
	for (i = 0; i < procs; i++) {
		if (xwrite(ch[i].to, &procs, sizeof(procs)))
			return -1;
		for (j = 0; j < procs; j++)
			if (xwrite(ch[i].to, &lens[j], sizeof(size_t)) ||
			    xwrite(ch[i].to, names[j], lens[j]))
				return -1;
	}
	for (i = 0; i < procs; i++) {
		char c;

		if (xread_by(ch[i].from, &c, 1, deadline) || c != 'R')
			return -1;
	}
	return 0;
}

static int run_storm(int procs)
{
	static struct child ch[MAX_PROCS];
	struct storm_report r[MAX_PROCS];
	int i, ok, silent = 0, failed = 0, wrong = 0, bad, msgs = procs * (procs - 1);
	double go_us, last_us = 0, rss = 0;
	long reg, qps, deadline;

	memset(r, 0, sizeof(r));
	ok = !gather(ch, procs);
	go_us = ibft_now_us();
	for (i = 0; ok && i < procs; i++)
		ok = !xwrite(ch[i].to, "G", 1);
	/* Each reports by its own limit; a process stuck in a call does not. */
	deadline = now_ms() + storm_timeout_ms() + 30000;
	for (i = 0; ok && i < procs; i++) {
		if (xread_by(ch[i].from, &r[i], sizeof(r[i]), deadline)) {
			memset(&r[i], 0, sizeof(r[i]));
			silent++;
		}
	}
	reg = ok ? rdma_sum("mr", "mrlen", ch, procs) : -1;
	qps = ok ? rdma_sum("qp", "", ch, procs) : -1;
	for (i = 0; i < procs; i++) {
		if (ch[i].pid > 0)
			(void)xwrite(ch[i].to, "Q", 1);
		close(ch[i].to);
	}
	bad = reap(ch, procs, now_ms() + 30000);
	for (i = 0; i < procs; i++)
		close(ch[i].from);
	if (!ok)
		return IBFT_CHECK(0, "rdm-storm", "%d processes could not be started "
				  "and introduced", procs);
	for (i = 0; i < procs; i++) {
		failed += 2 * (procs - 1) - r[i].sends_ok - r[i].recvs_ok;
		wrong += r[i].wrong;
		if (r[i].last_us > last_us)
			last_us = r[i].last_us;
		rss += r[i].rss_kib / 1024.0 / (procs - silent ? procs - silent : 1);
	}
	printf("storm P=%d last_ms=%.1f failed=%d of=%d silent=%d rss_mib=%.1f "
	       "reg_mib=%.2f qps=%.1f\n", procs,
	       last_us > go_us ? (last_us - go_us) / 1e3 : -1.0, failed, 2 * msgs,
	       silent, rss, reg < 0 ? -1.0 : reg / 1048576.0 / procs,
	       qps < 0 ? -1.0 : (double)qps / procs);
	return IBFT_CHECK(!failed && !wrong && !silent && !bad, "rdm-storm",
			  "%d processes, %d messages all at once: %d of %d sends "
			  "and receives did not complete, %d received wrong, %d "
			  "processes never reported, %d did not exit cleanly "
			  "(limit %d s)", procs, msgs, failed, 2 * msgs, wrong,
			  silent, bad, storm_timeout_ms() / 1000);
}

int main(int argc, char **argv)
{
	const char *role;

	ibft_parse(argc, argv, "-n PROCESSES (2 to 64; default 20)");
	ibft_argv = argv;
	role = getenv("IBFT_RDM_CHILD");
	if (role && !strncmp(role, "storm:", 6))
		return storm_child(atoi(role + 6));
	signal(SIGPIPE, SIG_IGN);
	if (ibft_opts.iters < 2 || ibft_opts.iters > MAX_PROCS) {
		fprintf(stderr, "ibft_rdm_storm: -n from 2 to %d\n", MAX_PROCS);
		return 2;
	}
	run_storm(ibft_opts.iters);
	return ibft_finish();
}
