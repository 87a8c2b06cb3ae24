/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RDM endpoints for the test and benchmark programs: see ibft_rdm_node.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ibft_rdm_node.h"

struct node *nodes[MAX_NODES];
int nnodes;
enum fi_progress want_progress;	/* FI_PROGRESS_UNSPEC: the provider's */
const char *want_av_name;
uint64_t want_av_flags;
enum fi_wait_obj want_wait = FI_WAIT_NONE;
uint64_t want_mr_mode;
enum fi_threading want_threading = FI_THREAD_DOMAIN;
size_t want_rx_size;
size_t want_tx_size;

struct fi_info *rdm_hints(uint64_t caps)
{
	struct fi_info *h = fi_allocinfo();

	h->fabric_attr->prov_name = strdup(ibft_opts.prov);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = caps;
	h->mode = FI_CONTEXT;
	h->domain_attr->mr_mode = (int)want_mr_mode;
	h->domain_attr->threading = want_threading;
	h->domain_attr->data_progress = want_progress;
	h->rx_attr->size = want_rx_size;
	h->tx_attr->size = want_tx_size;
	return h;
}

static const char *node_addr(int i)
{
	return (i % 2 && ibft_opts.dst) ? ibft_opts.dst : ibft_opts.src;
}

int node_ep_open(struct node *n, uint64_t cq_flags, struct fid_cntr *tx,
		 struct fid_cntr *rx)
{
	struct fid_cntr *c[2] = { tx, rx };
	const uint64_t flags[2] = { FI_SEND, FI_RECV };

	return node_ep_open_bind(n, cq_flags, c, flags, 2);
}

int node_ep_open_bind(struct node *n, uint64_t cq_flags, struct fid_cntr **c,
		      const uint64_t *flags, int nc)
{
	int ret, i;

	IBFT_CLOSE(n->ep);
	n->ep = NULL;
	ret = fi_endpoint(n->domain, n->info, &n->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->cq->fid, (n->tx_cq ? 0 : FI_TRANSMIT) |
				 FI_RECV | cq_flags);
	if (!ret && n->tx_cq)
		ret = fi_ep_bind(n->ep, &n->tx_cq->fid, FI_TRANSMIT | cq_flags);
	for (i = 0; !ret && i < nc; i++)
		if (c[i])
			ret = fi_ep_bind(n->ep, &c[i]->fid, flags[i]);
	if (!ret)
		ret = fi_enable(n->ep);
	n->namelen = sizeof(n->name);
	if (!ret)
		ret = fi_getname(&n->ep->fid, n->name, &n->namelen);
	return ret;
}

struct node *node_open(int i, uint64_t caps, uint64_t cq_flags)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED,
				      .wait_obj = want_wait };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .name = want_av_name,
				      .flags = want_av_flags };
	struct fi_info *hints = rdm_hints(caps);
	struct node *n = calloc(1, sizeof(*n));
	long t[4];
	int ret;

	/* How long until the endpoint takes connections: said, not judged. */
	t[0] = now_ms();
	ret = fi_getinfo(FI_VERSION(1, 17), node_addr(i), NULL, FI_SOURCE,
			 hints, &n->info);
	t[1] = now_ms();
	fi_freeinfo(hints);
	if (ret) {
		IBFT_CHECK(0, "rdm-open", "fi_getinfo(%s): %s", node_addr(i),
			   fi_strerror(-ret));
		free(n);
		return NULL;
	}
	ret = fi_fabric(n->info->fabric_attr, &n->fabric, NULL);
	if (!ret)
		ret = fi_domain(n->fabric, n->info, &n->domain, NULL);
	if (!ret)
		ret = fi_av_open(n->domain, &av_attr, &n->av, NULL);
	n->av_map = av_attr.map_addr;
	if (!ret)
		ret = fi_cq_open(n->domain, &cq_attr, &n->cq, n);	/* fi_poll names it */
	t[2] = now_ms();
	if (!ret)
		ret = node_ep_open(n, cq_flags, NULL, NULL);
	t[3] = now_ms();
	if (!ret && !nnodes)
		printf("# open: fi_getinfo %ld ms, fabric/domain/av/cq %ld ms, "
		       "fi_endpoint to fi_enable (and fi_getname) %ld ms\n",
		       t[1] - t[0], t[2] - t[1], t[3] - t[2]);
	if (ret) {
		IBFT_CHECK(0, "rdm-open", "opening an endpoint on %s: %s",
			   node_addr(i), fi_strerror(-ret));
		return NULL;
	}
	nodes[nnodes++] = n;
	return n;
}

int node_mr_reg(struct node *n, void *buf, size_t len, uint64_t access,
		struct fid_mr **mr)
{
	/* Without FI_MR_PROV_KEY the application chooses: one per region. */
	static uint64_t next_key = 0x1000;
	int ret;

	*mr = NULL;
	ret = fi_mr_reg(n->domain, buf, len, access, 0, next_key++, 0, mr, NULL);
	if (ret) {
		*mr = NULL;
		return ret;
	}
	if (n->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(*mr, &n->ep->fid, 0);
		if (!ret)
			ret = fi_mr_enable(*mr);
	}
	if (ret) {
		fi_close(&(*mr)->fid);
		*mr = NULL;
	}
	return ret;
}

ssize_t trecv_flags(struct node *n, uint64_t tag, uint64_t flags,
		    struct fi_context *ctx, void *buf, size_t len)
{
	struct iovec iov = { buf, len };
	struct fi_msg_tagged m = {
		.msg_iov = buf ? &iov : NULL, .iov_count = buf ? 1 : 0,
		.addr = FI_ADDR_UNSPEC, .tag = tag, .ignore = 0,
		.context = ctx,
	};

	return POST(fi_trecvmsg(n->ep, &m, flags));
}

void node_close(struct node *n)
{
	int i;

	if (!n)
		return;
	for (i = 0; i < nnodes; i++)
		if (nodes[i] == n)
			nodes[i] = nodes[--nnodes];
	IBFT_CLOSE(n->ep);
	IBFT_CLOSE(n->tx_cq);
	IBFT_CLOSE(n->cq);
	IBFT_CLOSE(n->av);
	IBFT_CLOSE(n->domain);
	IBFT_CLOSE(n->fabric);
	fi_freeinfo(n->info);
	free(n);
}

void close_all(void)
{
	while (nnodes)
		node_close(nodes[nnodes - 1]);
}

/* Every node inserts every node's name, in the same order. */
int insert_all(struct node **ns, int count)
{
	int i, j, ret;

	for (i = 0; i < count; i++) {
		for (j = 0; j < count; j++) {
			ret = fi_av_insert(ns[i]->av, ns[j]->name, 1,
					   &ns[i]->peer[j], 0, NULL);
			if (ret != 1)
				return IBFT_CHECK(0, "rdm-av-insert", "fi_av_insert "
						  "returned %d", ret), -1;
		}
	}
	return 0;
}

/* Read whatever every node's CQ has. */
void poll_all(void)
{
	struct fi_cq_tagged_entry e[8];
	struct fi_cq_err_entry err = { 0 };
	fi_addr_t src[8];
	struct comp *c;
	ssize_t k, i;
	int n;

	for (n = 0; n < nnodes; n++) {
		struct node *nd = nodes[n];

		k = fi_cq_readfrom(nd->cq, e, 8, src);
		for (i = 0; i < k; i++) {
			c = &nd->ring[nd->tail++ % COMP_RING];
			c->e = e[i];
			c->src = src[i];
			c->err = 0;
			c->olen = 0;
		}
		if (k == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(nd->cq, &err, 0) == 1) {
				c = &nd->ring[nd->tail++ % COMP_RING];
				memset(c, 0, sizeof(*c));
				c->e.op_context = err.op_context;
				c->e.flags = err.flags;
				c->e.len = err.len;
				c->e.tag = err.tag;
				c->e.data = err.data;
				c->src = FI_ADDR_NOTAVAIL;
				c->err = err.err;
				c->olen = err.olen;
				fi_cq_strerror(nd->cq, err.prov_errno,
					       err.err_data, c->why,
					       sizeof(c->why));
			}
		}
	}
}

long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next completion of n (progressing everyone); -1 on timeout. */
int wait_comp(struct node *n, struct comp *out, int timeout_ms)
{
	long end = now_ms() + timeout_ms;

	while (n->head == n->tail) {
		poll_all();
		if (n->head == n->tail && now_ms() > end)
			return -1;
	}
	*out = n->ring[n->head++ % COMP_RING];
	return 0;
}

/* Read n's CQ alone until it has a completion: others make no progress. */
int wait_comp_alone(struct node *n, struct comp *out, int timeout_ms)
{
	struct node *saved[MAX_NODES];
	int count = nnodes, i, ret;

	for (i = 0; i < count; i++)
		saved[i] = nodes[i];
	nodes[0] = n;
	nnodes = 1;
	ret = wait_comp(n, out, timeout_ms);
	for (i = 0; i < count; i++)
		nodes[i] = saved[i];
	nnodes = count;
	return ret;
}

/* Progress everyone for a while; returns completions n got meanwhile. */
int idle(struct node *n, int ms)
{
	long end = now_ms() + ms;

	while (now_ms() < end)
		poll_all();
	return (int)(n->tail - n->head);
}


uint8_t *xbuf(size_t len)
{
	uint8_t *p = malloc(len ? len : 1);

	if (!p)
		abort();
	return p;
}

int xwrite(int fd, const void *p, size_t len)
{
	return write(fd, p, len) == (ssize_t)len ? 0 : -1;
}

int xread(int fd, void *p, size_t len)
{
	size_t done = 0;
	ssize_t k;

	while (done < len) {
		k = read(fd, (char *)p + done, len - done);
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

/*
 * Run a child role in a fresh copy of this program (fork and exec: verbs
 * resources and librdmacm's device list do not survive a fork), talking
 * through pipes on fds 3 (in) and 4 (out).
 */
char **ibft_argv;

int spawn(struct child *ch, const char *role)
{
	char exe[4096];
	ssize_t len;
	int a[2], b[2];

	/* The path, not /proc/self/exe: under valgrind that is valgrind. */
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0 || pipe(a) || pipe(b))
		return -1;
	exe[len] = '\0';
	fflush(stdout);
	ch->pid = fork();
	if (ch->pid == 0) {
		dup2(a[0], 3);
		dup2(b[1], 4);
		setenv("IBFT_RDM_CHILD", role, 1);
		execv(exe, ibft_argv);
		_exit(127);
	}
	close(a[0]);
	close(b[1]);
	ch->to = a[1];
	ch->from = b[0];
	return ch->pid > 0 ? 0 : -1;
}

int swap_names(struct node *n, int in, int out, uint8_t *peer, size_t *plen)
{
	if (xwrite(out, &n->namelen, sizeof(size_t)) ||
	    xwrite(out, n->name, n->namelen) || xread(in, plen, sizeof(*plen)) ||
	    *plen > sizeof(n->name))
		return -1;
	return xread(in, peer, *plen);
}
