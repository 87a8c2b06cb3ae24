/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM connections, the rdma_cm side: the endpoint's thread, connecting,
 * accepting, retrying, and the life cycle of the listener (see
 * ibf_rdm_conn.h).  Everything here runs under ep->cm_lock.
 *
 * The endpoint's thread takes every rdma_cm event: it resolves, connects,
 * accepts, and once a connection is established hands it to
 * ibf_rdm_conn_flush.  Private data carries each side's name and its index
 * of the connection.
 *
 * Both sides connecting at once: the side whose name (sockaddr bytes) is
 * lower keeps its own connect and rejects the other's with a tie-break
 * marker; the higher side accepts the lower's request and drops its own
 * attempt.  Either way one RC connection carries both directions.
 *
 * An attempt that ends without a connection is tried again, with pauses
 * that double from 10 ms to 1 s, until FI_IBFAB_RDM_CONNECT_TIMEOUT has
 * passed since the first try; only then do the queued operations fail.
 * That covers a peer where nothing listens yet (an RDM endpoint is
 * connectionless to the application, so a peer that starts a little later
 * is no error), an address or route not resolved, a peer busy or out of
 * resources, and a request the CM gave up on.  Retrying never replaces a
 * connection: the accepting side is connected only once the requester has
 * answered its acceptance (RTU) or sent on the QP, after which the
 * requester sees ESTABLISHED, not an error.  Only an ibfab peer's definite
 * refusal (IBF_RDM_CM_REFUSED: the request was not a valid one) is final.
 * A peer that shows it is there and busy with us (its request crossed
 * ours, it refused ours for its own, or it gave up waiting for our answer)
 * restarts the time limit, up to IBF_RDM_ALIVE_MAX limits in all: in a
 * storm of first sends a live peer's thread may take longer than the limit
 * to get to us, and a gone peer shows no such sign.  For the same reason
 * each step of an attempt (address, route, the request's answer) is given
 * the limit from the step before it, or several times the slowest step
 * the endpoint saw lately if that is longer (ibf_rdm_step_due): where
 * processes outnumber CPUs, every CM step takes seconds, ours and the
 * peers' alike.
 *
 * Ids that are done with (refused requests, failed and lost attempts,
 * ended connections) are buried (ibf_rdm_grave.c) and destroyed by the
 * thread between events once their QPs are drained.
 */
#include "config.h"

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "ibf_rdm_conn.h"
#include "ibf_rdmacm.h"


static void ibf_rdm_cm_data(struct ibf_rdm_ep_conns *ep,
			    struct ibf_rdm_conn *conn,
			    struct ibf_rdm_cm_data *d)
{
	memset(d, 0, sizeof(*d));
	d->magic = IBF_RDM_CM_MAGIC;
	d->conn = conn->index;
	d->name = ep->name;
	d->window = ibf_rdm_window_ours(ep);
	d->flags = ep->rma_event ? IBF_RDM_CM_F_RMA_EVENT : 0;
}

/* ---- private data a peer sent: checked here, used nowhere else ---- */

int ibf_rdm_cm_request_parse(const void *pd, size_t len,
			     const struct sockaddr *peer, struct ibf_rdm_cm_data *d)
{
	memset(d, 0, sizeof(*d));
	if (!pd || len < sizeof(*d))
		return -FI_EINVAL;
	memcpy(d, pd, sizeof(*d));	/* the event's bytes may be unaligned */
	if (d->magic != IBF_RDM_CM_MAGIC ||
	    !ibf_addr_len((const struct sockaddr *)&d->name))
		return -FI_EINVAL;
	/* A name is an address on the requester's host, with a key: ibfab's
	 * names all have one, and nobody may claim a name without it. */
	if (!peer || !ibf_addr_same_host(peer, (const struct sockaddr *)&d->name) ||
	    !ibf_name_key(&d->name))
		return -FI_EACCES;
	return 0;
}

int ibf_rdm_cm_accept_parse(const void *pd, size_t len,
			    const struct ibf_name *want, struct ibf_rdm_cm_data *d)
{
	memset(d, 0, sizeof(*d));
	if (!pd || len < sizeof(*d))
		return -FI_EINVAL;
	memcpy(d, pd, sizeof(*d));
	if (d->magic != IBF_RDM_CM_MAGIC)
		return -FI_EINVAL;
	if (!ibf_name_key(&d->name) || !ibf_name_matches(want, &d->name))
		return -FI_EACCES;
	return 0;
}

uint32_t ibf_rdm_cm_reject_parse(const void *pd, size_t len)
{
	uint32_t magic;

	if (!pd || len < sizeof(magic))
		return 0;
	memcpy(&magic, pd, sizeof(magic));
	return magic;
}

/* IB CM's reject reasons: the peer waited for our answer in vain, and
 * nothing listens on the service (port). */
#define IBF_REJ_TIMEOUT 4
#define IBF_REJ_NO_LISTENER 8

#define IBF_RETRY_FIRST_MS 10
#define IBF_RETRY_MAX_MS 1000

static int ibf_rdm_conn_attempt(struct ibf_rdm_conn *conn);

/* FI_IBFAB_RDM_CONNECT_TIMEOUT, in ns. */
static uint64_t ibf_rdm_connect_limit_ns(void)
{
	return (uint64_t)ibf_params.rdm_connect_ms * 1000000u;
}

/* Start connecting conn (cm_lock held): the first of its attempts. */
int ibf_rdm_conn_start(struct ibf_rdm_conn *conn)
{
	conn->retry_first_ns = ibf_now_ns();
	conn->retry_until_ns = conn->retry_first_ns + ibf_rdm_connect_limit_ns();
	conn->retry_pause_ms = IBF_RETRY_FIRST_MS;
	return ibf_rdm_conn_attempt(conn);
}

/*
 * An attempt failed with err (cm_lock held): try again later while time is
 * left, else fail what waits.  The attempt's id goes once its event is
 * acked; its QP never carried anything.
 */
static void ibf_rdm_conn_retry(struct ibf_rdm_conn *conn, int err)
{
	uint64_t now = ibf_now_ns();
	char buf[64];

	if (now >= conn->retry_until_ns) {
		ibf_rdm_conn_fail(conn, err);
		return;
	}
	IBF_INFO(FI_LOG_EP_CTRL, "%s: %s; trying again in %u ms\n",
		 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)),
		 fi_strerror(-err), conn->retry_pause_ms);
	ibf_rdm_bury(conn->ep, conn->id, conn);	/* its QP never carried anything */
	conn->id = NULL;
	conn->retry_at_ns = now + (uint64_t)conn->retry_pause_ms * 1000000u;
	conn->retry_pause_ms = IBF_MIN(conn->retry_pause_ms * 2, IBF_RETRY_MAX_MS);
	ibf_rdm_conn_state(conn, IBF_CONN_RETRY);
}

/* A peer's signs of life stretch a round of attempts to this many limits
 * at most: one that keeps showing them and never connects (a liar) still
 * fails what waits for it. */
#define IBF_RDM_ALIVE_MAX 5

/*
 * The peer showed it is there and busy connecting with us (cm_lock held):
 * the connect time limit counts from now, for the attempt under way too,
 * within IBF_RDM_ALIVE_MAX limits of the round's first try.
 */
static void ibf_rdm_conn_alive(struct ibf_rdm_conn *conn)
{
	uint64_t limit = ibf_rdm_connect_limit_ns();
	uint64_t until = IBF_MIN(ibf_now_ns() + limit,
				 conn->retry_first_ns + IBF_RDM_ALIVE_MAX * limit);

	conn->retry_until_ns = IBF_MAX(conn->retry_until_ns, until);
	if (conn->state == IBF_CONN_CONNECTING)
		conn->retry_at_ns = IBF_MAX(conn->retry_at_ns, until);
}

/* An answer to our request comes a few of the CM's steps after it: the
 * peer's thread takes the request, ours the answer. */
#define IBF_RDM_LAG_STEPS 4

/* The endpoint's slowest attempt step within the last connect time
 * limit, 0 if none (cm_lock held). */
static uint64_t ibf_rdm_cm_lag(const struct ibf_rdm_ep_conns *ep, uint64_t now)
{
	return now - ep->cm_lag_at_ns < ibf_rdm_connect_limit_ns() ? ep->cm_lag_ns : 0;
}

/*
 * An attempt's next step (its address or route resolved, its request
 * answered) is due within the connect time limit from its last, or within
 * IBF_RDM_LAG_STEPS of the endpoint's slowest recent step if that is
 * longer, but not past IBF_RDM_ALIVE_MAX limits of the round's first try
 * (cm_lock held).  Measured in a storm of first sends by 32 processes on
 * 2 loaded emulated CPUs: a resolve took up to 22 s and an answer up to
 * 36 s, so live peers answered after 10 s; on an idle node a peer that
 * is gone still fails what waits within a limit of our request.
 */
static void ibf_rdm_step_due(struct ibf_rdm_conn *conn, uint64_t now)
{
	uint64_t limit = ibf_rdm_connect_limit_ns();
	uint64_t wait = IBF_MAX(limit, IBF_RDM_LAG_STEPS * ibf_rdm_cm_lag(conn->ep, now));
	uint64_t due = IBF_MIN(conn->step_ns + wait,
			       conn->retry_first_ns + IBF_RDM_ALIVE_MAX * limit);

	conn->retry_at_ns = IBF_MAX(conn->retry_at_ns, due);
}

/*
 * An attempt took a step (cm_lock held).  The slowest step of the
 * endpoint's attempts within the last connect time limit is kept: it
 * says how late this node's threads get to their CM events, and where
 * many processes connect at once on few CPUs the peers' threads are as
 * late as ours.
 */
static void ibf_rdm_cm_step(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;
	uint64_t now = ibf_now_ns(), took = now - conn->step_ns;

	if (took >= ibf_rdm_cm_lag(ep, now)) {
		ep->cm_lag_ns = took;
		ep->cm_lag_at_ns = now;
	}
	conn->step_ns = now;
	ibf_rdm_step_due(conn, now);
}

/*
 * We lost a simultaneous connect: the peer's connect is the one, and its
 * request is on its way (cm_lock held).  If none has come within the CM
 * timeout (the peer died meanwhile, or said so falsely), we connect again,
 * until FI_IBFAB_RDM_CONNECT_TIMEOUT has passed since the first try.
 */
static void ibf_rdm_conn_wait(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;

	ibf_rdm_bury(ep, conn->id, conn);
	conn->id = NULL;
	conn->retry_at_ns = ibf_now_ns() +
			    (uint64_t)ibf_params.cm_timeout_ms * 1000000u;
	ibf_rdm_conn_state(conn, IBF_CONN_WAITING);
}

/*
 * A connection's timer went off (cm_lock held): a pause before the next
 * attempt is over, a peer that won a simultaneous connect never came, or
 * an attempt had no answer in time (a peer whose node went away after its
 * address was resolved leaves the CM retrying for a minute).
 */
static void ibf_rdm_timer_fired(struct ibf_rdm_conn *conn, uint64_t now)
{
	char buf[64];
	int ret;

	ibf_addr_str((const void *)&conn->name, buf, sizeof(buf));
	switch (conn->state) {
	case IBF_CONN_CONNECTING:
		/* Steps got slower since this one began: it waits as long. */
		ibf_rdm_step_due(conn, now);
		if (conn->retry_at_ns > now)
			return;
		IBF_WARN(FI_LOG_EP_CTRL, "no answer from %s in %" PRIu64
			 " ms (FI_IBFAB_RDM_CONNECT_TIMEOUT, or longer while "
			 "this node's CM is slow)\n", buf,
			 (now - conn->step_ns) / 1000000u);
		ibf_rdm_conn_fail(conn, -FI_ETIMEDOUT);
		return;
	case IBF_CONN_WAITING:
		if (now >= conn->retry_until_ns) {
			IBF_WARN(FI_LOG_EP_CTRL, "%s won a simultaneous connect "
				 "but never connected\n", buf);
			ibf_rdm_conn_fail(conn, -FI_ETIMEDOUT);
			return;
		}
		break;
	default:
		break;
	}
	ret = ibf_rdm_conn_attempt(conn);
	if (ret)
		ibf_rdm_conn_fail(conn, ret);
}

/* Whether conn's timer runs: a pause, a wait for the winner, an attempt. */
static int ibf_rdm_conn_timed(const struct ibf_rdm_conn *conn)
{
	return conn->state == IBF_CONN_RETRY || conn->state == IBF_CONN_WAITING ||
	       conn->state == IBF_CONN_CONNECTING;
}

/*
 * The thread, between events (cm_lock held): fire the connections' timers
 * that are due; returns how long poll may sleep before the next, or -1.
 */
int ibf_rdm_timers_due(struct ibf_rdm_ep_conns *ep)
{
	uint64_t now, next = UINT64_MAX;
	struct ibf_rdm_conn *conn;
	uint32_t i;

	if (!ep->nstate[IBF_CONN_RETRY] && !ep->nstate[IBF_CONN_WAITING] &&
	    !ep->nstate[IBF_CONN_CONNECTING])
		return -1;
	now = ibf_now_ns();
	for (i = 0; i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		if (!ibf_rdm_conn_timed(conn))
			continue;
		if (conn->retry_at_ns <= now)
			ibf_rdm_timer_fired(conn, now);
		/* A fired timer may have set the next (a new attempt's, a
		 * longer wait's). */
		if (ibf_rdm_conn_timed(conn) && conn->retry_at_ns > now)
			next = IBF_MIN(next, conn->retry_at_ns);
	}
	if (next == UINT64_MAX)
		return -1;
	return (int)((next - now) / 1000000u) + 1;
}

/* One connect attempt: resolve, then (in the thread) route and connect. */
static int ibf_rdm_conn_attempt(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;
	struct sockaddr_storage src, dst;
	struct rdma_cm_id *id;
	int ret;

	if (rdma_create_id(ep->channel, &id, conn, RDMA_PS_TCP))
		return ibf_errno_to_fi(errno);
	ibf_name_sockaddr(&ep->name, &src);
	ibf_addr_set_port((struct sockaddr *)&src, 0);
	ibf_name_sockaddr(&conn->name, &dst);
	if (rdma_resolve_addr(id, (struct sockaddr *)&src,
			      (struct sockaddr *)&dst, ibf_params.cm_timeout_ms)) {
		ret = ibf_errno_to_fi(errno);
		rdma_destroy_id(id);
		return ret;
	}
	conn->id = id;
	conn->step_ns = ibf_now_ns();
	/* Each step is due by ibf_rdm_step_due (the round's time limit, and
	 * no sooner than any sign of life made it), and not within two CM
	 * timeouts of now. */
	conn->retry_at_ns = conn->step_ns +
			    2 * (uint64_t)ibf_params.cm_timeout_ms * 1000000u;
	ibf_rdm_step_due(conn, conn->step_ns);
	ibf_rdm_conn_state(conn, IBF_CONN_CONNECTING);
	return 0;
}

/* ---- events ---- */

static void ibf_rdm_reject(struct rdma_cm_id *id, uint32_t magic)
{
	struct ibf_rdm_cm_data d = { .magic = magic };

	rdma_reject(id, magic ? &d : NULL, magic ? sizeof(d) : 0);
}

/* Accept id as conn's connection (cm_lock held). */
static void ibf_rdm_accept(struct ibf_rdm_ep_conns *ep,
			   struct ibf_rdm_conn *conn,
			   struct rdma_cm_id *id, const struct ibf_rdm_cm_data *req)
{
	struct ibf_rdm_cm_data d;
	struct rdma_conn_param cp;
	int ret;

	id->context = conn;
	/* Before the QP is published (ep->qp_map): arrivals on it read them. */
	ibf_rdm_window_set(conn, req->window);
	ibf_rdm_peer_events_set(conn, req->flags);
	ret = ibf_rdm_qp_create(conn, id);
	if (ret) {
		ibf_rdm_reject(id, IBF_RDM_CM_BUSY);	/* out of resources, for now */
		ibf_rdm_bury(ep, id, conn);
		return;
	}
	ibf_rdm_cm_data(ep, conn, &d);
	ibf_cm_param_init(id, &ep->base.domain->dev_attr, &cp, &d, sizeof(d));
	/* Just accepted counts as just used: not the first one the
	 * connection cap closes. */
	__atomic_store_n(&conn->last_use, __atomic_load_n(&ep->use_tick,
			 __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	/*
	 * Before accepting: the peer may send as soon as it has our answer,
	 * and a rendezvous it sends is read (and answered) through conn->id.
	 */
	__atomic_store_n(&conn->id, id, __ATOMIC_RELEASE);
	if (rdma_accept(id, &cp)) {
		IBF_WARN(FI_LOG_EP_CTRL, "rdma_accept: %s\n", strerror(errno));
		__atomic_store_n(&conn->id, NULL, __ATOMIC_RELEASE);
		ibf_rdm_bury(ep, id, conn);
		return;
	}
	ibf_rdm_conn_state(conn, IBF_CONN_ACCEPTING);
}

/*
 * Is conn's peer still there?  A PING on its QP (cm_lock held): if the
 * peer is gone, the send fails once the transport's retries run out, and
 * that failure ends the connection (ibf_rdm_conn_broken) when a CQ of the
 * endpoint is next read.  Sent inline: it needs no registered memory.
 */
void ibf_rdm_probe(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;
	struct ibv_sge sge = {
		.addr = (uintptr_t)&conn->probe_hdr,
		.length = sizeof(conn->probe_hdr),
	};
	struct ibf_rdm_op *op = conn->probe;

	if (conn->state != IBF_CONN_CONNECTED || ep->max_inline < sge.length)
		return;
	if (!op) {
		op = calloc(1, sizeof(*op));
		if (!op)
			return;
		op->ep = &ep->as_ops;
		op->conn = conn;
		op->op.kind = IBF_OP_RDM;
		op->mem = (uint8_t *)&conn->probe_hdr;
		conn->probe = op;
	} else if (__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) == IBF_RDM_PROBE) {
		return;		/* one is out */
	}
	memset(&conn->probe_hdr, 0, sizeof(conn->probe_hdr));
	ibf_rdm_hdr_set(&conn->probe_hdr, IBF_RDM_PING, 0,
			ibf_rdm_key_gen(&ep->as_ops));
	ibf_rdm_op_to_atomic(op, IBF_RDM_PROBE);
	if (ibf_rdm_post_send(conn, op, &sge, 1, 1))
		ibf_rdm_op_to_atomic(op, IBF_RDM_FREE);
}

/* Whether the endpoint has an accepting half of a connection to itself
 * that is alive: there is never more than one. */
static int ibf_rdm_self_alive(struct ibf_rdm_ep_conns *ep)
{
	struct ibf_rdm_conn *c = ep->self_conn;

	return c && c->self && c->gen == ep->self_gen &&
	       (c->state == IBF_CONN_ACCEPTING || c->state == IBF_CONN_CONNECTED);
}

static void ibf_rdm_on_request(struct ibf_rdm_ep_conns *ep,
			       struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct ibf_rdm_cm_data data, *d = &data;
	struct ibf_rdm_conn *conn;
	char from[64], claimed[64];
	int self, ret;

	ret = ibf_rdm_cm_request_parse(ev->param.conn.private_data,
				       ev->param.conn.private_data_len,
				       rdma_get_peer_addr(id), d);
	if (ret) {
		IBF_WARN(FI_LOG_EP_CTRL, "a connection request from %s: %s: "
			 "rejected\n",
			 ibf_addr_str(rdma_get_peer_addr(id), from, sizeof(from)),
			 ret == -FI_EACCES ? ibf_addr_str((const void *)&d->name,
				claimed, sizeof(claimed)) : "not from an ibfab "
			 "RDM endpoint");
		if (ret == -FI_EACCES)
			IBF_WARN(FI_LOG_EP_CTRL, "(a name must be on the "
				 "requester's host and carry its key)\n");
		ibf_rdm_reject(id, IBF_RDM_CM_REFUSED);
		ibf_rdm_bury(ep, id, NULL);
		return;
	}
	self = !memcmp(&d->name, &ep->name, sizeof(ep->name));
	if (self && ibf_rdm_self_alive(ep)) {
		/* Our own connect has one already: a second is someone
		 * else's, who knows our name. */
		IBF_WARN(FI_LOG_EP_CTRL, "a second connection request naming "
			 "this endpoint itself: refused (BUSY)\n");
		ibf_rdm_reject(id, IBF_RDM_CM_BUSY);
		ibf_rdm_bury(ep, id, NULL);
		return;
	}
	conn = self ? NULL : ibf_rdm_conn_claim(ep, &d->name);
	if (ep->nstate[IBF_CONN_ACCEPTING] >= IBF_RDM_MAX_ACCEPTING &&
	    (!conn || conn->state != IBF_CONN_CONNECTING)) {
		char from[64];

		IBF_WARN(FI_LOG_EP_CTRL, "%u connection requests accepted and "
			 "not yet established: the one from %s is refused for "
			 "now (BUSY; it will try again)\n",
			 ep->nstate[IBF_CONN_ACCEPTING],
			 ibf_addr_str((const void *)&d->name, from, sizeof(from)));
		ibf_rdm_reject(id, IBF_RDM_CM_BUSY);
		ibf_rdm_bury(ep, id, NULL);
		return;
	}
	if (!self && ep->nstate[IBF_CONN_CONNECTED] + ep->nstate[IBF_CONN_ACCEPTING] >=
	    ibf_params.rdm_max_conns &&
	    (!conn || conn->state == IBF_CONN_IDLE || conn->state == IBF_CONN_RETRY)) {
		/* At the cap: the requester tries again (BUSY) once progress
		 * has closed the least recently used idle connection. */
		ibf_rdm_reject(id, IBF_RDM_CM_BUSY);
		ibf_rdm_bury(ep, id, NULL);
		ep->cap_due = 1;
		ibf_rdm_set_pending(ep);
		return;
	}
	if (!conn) {
		conn = ibf_rdm_conn_new(ep, &d->name, self);
		if (conn && self) {
			ep->self_conn = conn;
			ep->self_gen = conn->gen;
		}
	}
	if (!conn) {
		ibf_rdm_reject(id, IBF_RDM_CM_BUSY);	/* no memory, for now */
		ibf_rdm_bury(ep, id, NULL);
		return;
	}
	switch (conn->state) {
	case IBF_CONN_CONNECTING:
		if (memcmp(&ep->name, &d->name, sizeof(ep->name)) < 0) {
			/* Ours wins; the peer accepts it instead. */
			ibf_rdm_conn_alive(conn);
			ibf_rdm_reject(id, IBF_RDM_CM_TIEBREAK);
			ibf_rdm_bury(ep, id, NULL);
			return;
		}
		conn->loser = conn->id;
		conn->id = NULL;
		break;
	case IBF_CONN_ACCEPTING:
	case IBF_CONN_CONNECTED:
		/*
		 * A live connection is never replaced on a request's word:
		 * anyone on the peer's host may claim its name.  The peer may
		 * also have died and come back (its node crashed: no
		 * disconnect came); then the PING fails, the connection ends,
		 * and the requester's next try, which BUSY asks for, is taken.
		 */
		ibf_rdm_reject(id, IBF_RDM_CM_BUSY);
		ibf_rdm_bury(ep, id, NULL);
		ibf_rdm_probe(conn);
		return;
	case IBF_CONN_RETRY:
	case IBF_CONN_WAITING:
		/* The peer is up now, or its request came as it said it
		 * would: its connection carries our queue. */
		break;
	default:
		break;
	}
	ibf_rdm_accept(ep, conn, id, d);
}

static void ibf_rdm_on_established(struct ibf_rdm_conn *conn,
				   struct rdma_cm_event *ev)
{
	struct ibf_rdm_cm_data data, *d = &data;
	int ret;

	if (conn->state == IBF_CONN_CONNECTING) {
		ret = ibf_rdm_cm_accept_parse(ev->param.conn.private_data,
					      ev->param.conn.private_data_len,
					      &conn->name, d);
		if (ret == -FI_EINVAL) {
			ibf_rdm_conn_fail(conn, -FI_EOTHER);
			return;
		}
		/* The endpoint listening there must be the one we name (an
		 * endpoint that took over the port of a dead one is not). */
		if (ret) {
			char buf[64];

			IBF_WARN(FI_LOG_EP_CTRL, "the endpoint listening at %s is "
				 "not the one the AV names (another key): it "
				 "restarted, or it is not that peer\n",
				 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)));
			ibf_rdm_conn_fail(conn, -FI_ECONNREFUSED);
			return;
		}
		if (!ibf_name_key(&conn->name))	/* named by address: now known */
			ibf_name_set_key(&conn->name, ibf_name_key(&d->name));
		ibf_rdm_window_set(conn, d->window);
		ibf_rdm_peer_events_set(conn, d->flags);
	}
	ibf_qp_in_rts(conn->id->qp);
	__atomic_store_n(&conn->established, 1, __ATOMIC_RELEASE);
	ibf_rdm_conn_flush(conn);
}

/* The magic of a reject's private data, or 0. */
static uint32_t ibf_rdm_reject_magic(const struct rdma_cm_event *ev)
{
	return ibf_rdm_cm_reject_parse(ev->param.conn.private_data,
				       ev->param.conn.private_data_len);
}

/* What the CM said when it ended an attempt: the event and its status (a
 * reject's reason), for the user reading why connecting took long or
 * failed. */
static void ibf_rdm_cm_said(const struct ibf_rdm_conn *conn,
			    const struct rdma_cm_event *ev)
{
	char buf[64];

	IBF_INFO(FI_LOG_EP_CTRL, "connecting to %s: %s, status %d\n",
		 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)),
		 rdma_event_str(ev->event), ev->status);
}

/* Our request was refused (cm_lock held). */
static void ibf_rdm_on_rejected(struct ibf_rdm_conn *conn,
				const struct rdma_cm_event *ev)
{
	switch (ibf_rdm_reject_magic(ev)) {
	case IBF_RDM_CM_TIEBREAK:
		ibf_rdm_conn_alive(conn);
		ibf_rdm_conn_wait(conn);
		return;
	case IBF_RDM_CM_REFUSED:
		ibf_rdm_cm_said(conn, ev);
		ibf_rdm_conn_fail(conn, -FI_ECONNREFUSED);
		return;
	case IBF_RDM_CM_BUSY:
		break;
	default:
		/* Nothing listens there (yet), the peer's CM gave up
		 * waiting for our answer, or its id went away. */
		if (ev->status == IBF_REJ_TIMEOUT)
			ibf_rdm_conn_alive(conn);
		if (ev->status != IBF_REJ_NO_LISTENER)
			ibf_rdm_cm_said(conn, ev);
		break;
	}
	ibf_rdm_conn_retry(conn, -FI_ECONNREFUSED);
}

/*
 * The peer whose request we accepted never completed it (it gave up
 * waiting for our answer, or its id went away), cm_lock held.  No
 * connection came of it, so what is queued for the peer waits on and we
 * connect ourselves; the peer, if it still wants one, tries again too, and
 * the tie-break makes one connection of the two.
 */
static void ibf_rdm_accept_failed(struct ibf_rdm_conn *conn,
				  const struct rdma_cm_event *ev)
{
	uint64_t first, until;
	int ret;

	ibf_rdm_cm_said(conn, ev);
	if (!conn->queue_head) {
		ibf_rdm_conn_fail(conn, -FI_ECONNABORTED);	/* nothing waits */
		return;
	}
	first = conn->retry_first_ns;
	until = conn->retry_until_ns;
	ibf_rdm_conn_reset(conn);
	ret = ibf_rdm_conn_start(conn);
	if (ret) {
		ibf_rdm_conn_fail(conn, ret);
	} else if (until > ibf_now_ns()) {
		/* A round of attempts was under way: it goes on, not anew
		 * (a requester that never completes cannot hold what waits). */
		conn->retry_first_ns = first;
		conn->retry_until_ns = until;
	}
}

/* An event on one of conn's ids (cm_lock held). */
static void ibf_rdm_conn_event(struct ibf_rdm_ep_conns *ep,
			       struct ibf_rdm_conn *conn,
			       struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct ibf_rdm_cm_data d;
	struct rdma_conn_param cp;

	if (id == conn->loser) {
		if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED &&
		    ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED) {
			ibf_rdm_bury(ep, id, conn);
			conn->loser = NULL;
		}
		return;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ibf_rdm_cm_step(conn);
		if (rdma_resolve_route(id, ibf_params.cm_timeout_ms))
			ibf_rdm_conn_fail(conn, ibf_errno_to_fi(errno));
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (ibf_rdm_qp_create(conn, id)) {
			ibf_rdm_conn_fail(conn, -FI_ENOMEM);
			break;
		}
		ibf_rdm_cm_data(ep, conn, &d);
		ibf_cm_param_init(id, &ep->base.domain->dev_attr, &cp, &d, sizeof(d));
		if (rdma_connect(id, &cp)) {
			ibf_rdm_conn_fail(conn, ibf_errno_to_fi(errno));
			break;
		}
		ibf_rdm_cm_step(conn);	/* the route, our QP, the request */
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (conn->state == IBF_CONN_CONNECTING)
			ibf_rdm_cm_step(conn);
		ibf_rdm_on_established(conn, ev);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (conn->state == IBF_CONN_CONNECTING)
			ibf_rdm_cm_step(conn);
		if (conn->state == IBF_CONN_ACCEPTING)
			ibf_rdm_accept_failed(conn, ev);
		else
			ibf_rdm_on_rejected(conn, ev);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		ibf_rdm_conn_retry(conn, -FI_EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		if (conn->state == IBF_CONN_ACCEPTING) {
			ibf_rdm_accept_failed(conn, ev);
			break;
		}
		/* Our request timed out, or its answer could not be used:
		 * the peer is not connected by it (see the top). */
		ibf_rdm_cm_said(conn, ev);
		ibf_rdm_conn_retry(conn, -FI_EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rdma_disconnect(id);
		ibf_rdm_conn_fail(conn, -FI_ECONNABORTED);
		break;
	default:
		break;
	}
}

/*
 * An event on the accepting half of a connection to ourselves: it comes
 * up, or any end of it (a disconnect, a requester that never completed
 * or went away) ends the record, so that it stops counting as accepting.
 */
static void ibf_rdm_self_event(struct ibf_rdm_conn *conn, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		__atomic_store_n(&conn->established, 1, __ATOMIC_RELEASE);
		ibf_rdm_conn_state(conn, IBF_CONN_CONNECTED);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rdma_disconnect(ev->id);
		ibf_rdm_conn_fail(conn, -FI_ECONNABORTED);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		ibf_rdm_conn_fail(conn, -FI_ECONNREFUSED);
		break;
	default:
		break;
	}
}

void ibf_rdm_cm_event(struct ibf_rdm_ep_conns *ep, struct rdma_cm_event *ev)
{
	struct ibf_rdm_conn *conn;

	IBF_DBG(FI_LOG_EP_CTRL, "%s on id %p\n", rdma_event_str(ev->event),
		(void *)ev->id);
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		ibf_rdm_on_request(ep, ev);
		return;
	}
	conn = ev->id->context;
	if (!conn || ev->id == ep->listen_id)
		return;		/* a buried id, the listener */
	if (conn->self) {
		ibf_rdm_self_event(conn, ev);
		return;
	}
	ibf_rdm_conn_event(ep, conn, ev);
}

/*
 * The endpoint's thread: rdma_cm events always; with FI_PROGRESS_AUTO also
 * its CQ, so data moves (rendezvous reads, FINs, matching) while the
 * application is not in fi_cq_read.
 */
static void *ibf_rdm_cm_thread(void *arg)
{
	struct ibf_rdm_ep_conns *ep = arg;
	struct pollfd fds[4] = {
		{ .fd = ep->channel->fd, .events = POLLIN },
		{ .fd = ep->stop_fd, .events = POLLIN },
		{ .fd = ep->auto_progress ? ep->channel_cq->fd : -1, .events = POLLIN },
		{ .fd = ep->wake_fd, .events = POLLIN },
	};
	struct rdma_cm_event *ev;
	int timeout = -1;

	if (ep->auto_progress)
		ep->up->progress(ep);	/* arms the CQ */
	for (;;) {
		if (poll(fds, 4, timeout) < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break;
		if (fds[2].revents)
			ep->up->progress(ep);
		while (!rdma_get_cm_event(ep->channel, &ev)) {
			pthread_mutex_lock(&ep->cm_lock);
			ibf_rdm_cm_event(ep, ev);
			pthread_mutex_unlock(&ep->cm_lock);
			rdma_ack_cm_event(ev);
		}
		/* Every event taken is acked: dead ids may go now. */
		pthread_mutex_lock(&ep->cm_lock);
		ibf_rdm_graves_reap(ep);
		timeout = ibf_rdm_timers_due(ep);
		pthread_mutex_unlock(&ep->cm_lock);
	}
	return NULL;
}

/* ---- life cycle ---- */

/*
 * The endpoint's name: where it listens, and a random key nobody who was
 * not given the name can guess (ibf_name_key), so no other process can
 * pass for it.
 */
static int ibf_rdm_name_make(struct ibf_rdm_ep_conns *ep)
{
	uint64_t key = 0;
	int ret;

	ret = ibf_name_from_sockaddr(&ep->name, rdma_get_local_addr(ep->listen_id),
				     ep->namelen);
	if (ret)
		return ret;
	while (!(uint32_t)key || !(key >> 32)) {
		if (getrandom(&key, sizeof(key), 0) != sizeof(key)) {
			IBF_WARN(FI_LOG_EP_CTRL, "getrandom: %s\n", strerror(errno));
			return ibf_errno_to_fi(errno);
		}
	}
	ibf_name_set_key(&ep->name, key);
	return 0;
}

int ibf_rdm_cm_listen(struct ibf_rdm_ep_conns *ep, const struct fi_info *info)
{
	struct ibv_port_attr port;
	struct sockaddr_storage src;
	char buf[64];

	if (!info->src_addr || !info->src_addrlen ||
	    info->src_addrlen > sizeof(src)) {
		IBF_WARN(FI_LOG_EP_CTRL, "an RDM endpoint needs the src_addr of "
			 "an ibfab fi_info\n");
		return -FI_EINVAL;
	}
	memset(&src, 0, sizeof(src));
	memcpy(&src, info->src_addr, info->src_addrlen);
	ibf_sockaddr_set_key((struct sockaddr *)&src, 0);	/* not the kernel's */
	ep->channel = rdma_create_event_channel();
	if (!ep->channel)
		return ibf_errno_to_fi(errno);
	if (ibf_fd_set_nonblock(ep->channel->fd) ||
	    rdma_create_id(ep->channel, &ep->listen_id, NULL, RDMA_PS_TCP))
		return ibf_errno_to_fi(errno);
	ibf_cm_reuse_addr(ep->listen_id);
	if (rdma_bind_addr(ep->listen_id, (struct sockaddr *)&src)) {
		int ret = ibf_errno_to_fi(errno);

		IBF_WARN(FI_LOG_EP_CTRL, "cannot bind %s: %s\n",
			 ibf_addr_str((struct sockaddr *)&src, buf, sizeof(buf)),
			 strerror(errno));
		return ret;
	}
	if (ep->listen_id->verbs != ep->base.domain->verbs) {
		IBF_WARN(FI_LOG_EP_CTRL, "%s is not on the domain's device\n",
			 ibf_addr_str((struct sockaddr *)&src, buf, sizeof(buf)));
		return -FI_EINVAL;
	}
	if (rdma_listen(ep->listen_id, 1024))
		return ibf_errno_to_fi(errno);
	ep->max_read = 1u << 30;
	if (!ibv_query_port(ep->base.domain->verbs, ep->listen_id->port_num, &port) &&
	    port.max_msg_sz)
		ep->max_read = IBF_MIN(port.max_msg_sz, 1u << 30);
	ep->namelen = ibf_addr_len(rdma_get_local_addr(ep->listen_id));
	return ibf_rdm_name_make(ep);
}

int ibf_rdm_cm_start(struct ibf_rdm_ep_conns *ep)
{
	int ret;

	/* Asked once: the data path cannot afford a call per post. */
	ep->post_trace = ibf_post_trace_on();
	ep->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (ep->stop_fd < 0)
		return ibf_errno_to_fi(errno);
	ep->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ep->wake_fd < 0)
		return ibf_errno_to_fi(errno);
	ret = pthread_create(&ep->cm_thread, NULL, ibf_rdm_cm_thread, ep);
	if (ret) {
		IBF_WARN(FI_LOG_EP_CTRL, "pthread_create: %s\n", strerror(ret));
		return ibf_errno_to_fi(ret);
	}
	ep->cm_thread_started = 1;
	return 0;
}

void ibf_rdm_cm_stop(struct ibf_rdm_ep_conns *ep)
{
	struct ibf_rdm_conn *conn;
	uint64_t one = 1;
	uint32_t i;

	if (ep->cm_thread_started) {
		if (write(ep->stop_fd, &one, sizeof(one)) != sizeof(one))
			IBF_WARN(FI_LOG_EP_CTRL, "cannot stop the connection "
				 "thread\n");
		pthread_join(ep->cm_thread, NULL);
		ep->cm_thread_started = 0;
	}
	/* Peers see DISCONNECTED; our QPs flush what they hold. */
	for (i = 0; i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		if (conn->id && (conn->state == IBF_CONN_ACCEPTING ||
				 conn->state == IBF_CONN_CONNECTED))
			rdma_disconnect(conn->id);
		ibf_rdm_bury(ep, conn->id, conn);
		ibf_rdm_bury(ep, conn->loser, conn);
		conn->id = conn->loser = NULL;
	}
}

void ibf_rdm_cm_destroy(struct ibf_rdm_ep_conns *ep)
{
	struct rdma_cm_event *ev;
	uint32_t i;

	/*
	 * Ack what is left, or rdma_destroy_id would wait for it; a request
	 * that came too late is refused, and its id is ours to destroy.
	 */
	while (ep->channel && !rdma_get_cm_event(ep->channel, &ev)) {
		struct rdma_cm_id *late = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ?
					  ev->id : NULL;

		if (late)
			rdma_reject(late, NULL, 0);
		rdma_ack_cm_event(ev);
		if (late)
			rdma_destroy_id(late);
	}
	ibf_rdm_graves_destroy(ep);
	ibf_rdm_qp_map_free(ep);
	for (i = 0; i < ep->nconns; i++) {
		struct ibf_rdm_conn *conn = ibf_rdm_conn_at(ep, i);

		free(conn->probe);
		free(conn->grant);
		free(conn);
	}
	for (i = 0; i < IBF_CONN_DIRS; i++)
		free(ep->conn_dir[i]);
	free(ep->by_name);
	if (ep->listen_id)
		rdma_destroy_id(ep->listen_id);
	if (ep->channel)
		rdma_destroy_event_channel(ep->channel);
	if (ep->stop_fd >= 0)
		close(ep->stop_fd);
	if (ep->wake_fd >= 0)
		close(ep->wake_fd);
}
