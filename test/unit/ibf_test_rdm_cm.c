/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDM engine's connection handling (ibf_rdm_cm.c), without a device
 * or a network: the events of rdma_cm are made up by the test and given
 * to ibf_rdm_cm_event as the endpoint's thread would, and its timers
 * fired through ibf_rdm_timers_due.  Shown: the simultaneous-connect
 * tie-break from both sides, the wait for the winner's request and its
 * end, retries with doubling pauses, a live connection never replaced by
 * a request, and a peer that vanishes in each state.
 *
 * The librdmacm and libibverbs calls the engine makes are wrapped
 * (-Wl,--wrap, in Makefile.am): ids and QPs come from this file, and what
 * was rejected, accepted or connected is recorded.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ibf_rdm.h"

/* ---- the mock librdmacm ---- */

#define NIDS 8
static struct ibv_context ctx;
static struct rdma_cm_id ids[NIDS];
static struct ibv_qp qps[NIDS];
static int nids;

static struct {
	int rejects;
	uint32_t reject_magic;	/* the last reject's, 0 for none */
	int accepts;
	int connects;
	int disconnects;
	int resolves;
	int sends;		/* PINGs */
} cm;

static int mock_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	(void)qp;
	(void)wr;
	(void)bad;
	cm.sends++;
	return 0;
}

#define WRAP(ret, name, ...) \
	ret __wrap_##name(__VA_ARGS__); \
	ret __wrap_##name(__VA_ARGS__)

WRAP(int, rdma_create_id, struct rdma_event_channel *ch,
     struct rdma_cm_id **id, void *context, enum rdma_port_space ps)
{
	(void)ch;
	(void)ps;
	cr_assert_lt(nids, NIDS);
	*id = &ids[nids++];
	(*id)->context = context;
	return 0;
}

WRAP(int, rdma_resolve_addr, struct rdma_cm_id *id, struct sockaddr *src,
     struct sockaddr *dst, int timeout_ms)
{
	(void)id;
	(void)src;
	(void)dst;
	(void)timeout_ms;
	cm.resolves++;
	return 0;
}

WRAP(int, rdma_resolve_route, struct rdma_cm_id *id, int timeout_ms)
{
	(void)id;
	(void)timeout_ms;
	return 0;
}

WRAP(int, rdma_create_qp, struct rdma_cm_id *id, struct ibv_pd *pd,
     struct ibv_qp_init_attr *attr)
{
	(void)pd;
	(void)attr;
	id->qp = &qps[id - ids];
	return 0;
}

WRAP(void, rdma_destroy_qp, struct rdma_cm_id *id)
{
	id->qp = NULL;
}

WRAP(int, rdma_destroy_id, struct rdma_cm_id *id)
{
	(void)id;
	return 0;
}

WRAP(int, rdma_connect, struct rdma_cm_id *id, struct rdma_conn_param *cp)
{
	(void)id;
	(void)cp;
	cm.connects++;
	return 0;
}

WRAP(int, rdma_accept, struct rdma_cm_id *id, struct rdma_conn_param *cp)
{
	(void)id;
	(void)cp;
	cm.accepts++;
	return 0;
}

WRAP(int, rdma_reject, struct rdma_cm_id *id, const void *pd, uint8_t len)
{
	(void)id;
	cm.rejects++;
	cm.reject_magic = pd && len >= 4 ? *(const uint32_t *)pd : 0;
	return 0;
}

WRAP(int, rdma_disconnect, struct rdma_cm_id *id)
{
	(void)id;
	cm.disconnects++;
	return 0;
}

WRAP(int, ibv_modify_qp, struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	(void)qp;
	(void)attr;
	(void)mask;
	return 0;
}

/* ---- an endpoint and its peer ---- */

static struct ibf_domain *dom;
static struct ibf_rdm_ep *ep;
static struct ibf_name peer;	/* the other endpoint's name */

/* The name of the endpoint at 10.0.0.host, port, with key. */
static struct ibf_name name_of(int host, uint16_t port, uint64_t key)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port) };
	struct ibf_name n;

	sin.sin_addr.s_addr = htonl(0x0a000000u | (uint32_t)host);
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)&sin, sizeof(sin)), 0);
	ibf_name_set_key(&n, key);
	return n;
}

/* Our name and the peer's, ours the lower (ours_wins) or the higher. */
static void names(int ours_wins)
{
	struct ibf_name a = name_of(1, 5000, 0x1111), b = name_of(2, 6000, 0x2222);

	cr_assert_lt(memcmp(&a, &b, sizeof(a)), 0);
	ep->name = ours_wins ? a : b;
	peer = ours_wins ? b : a;
}

static void setup(void)
{
	memset(&cm, 0, sizeof(cm));
	memset(ids, 0, sizeof(ids));
	nids = 0;
	ctx.ops.post_send = mock_post_send;
	for (int i = 0; i < NIDS; i++)
		qps[i] = (struct ibv_qp){ .context = &ctx, .qp_num = 0x100u + (uint32_t)i };
	ibf_params.cm_timeout_ms = 100;
	ibf_params.rdm_connect_ms = 1000;
	ibf_params.rdm_max_conns = 64;
	dom = calloc(1, sizeof(*dom));
	ep = calloc(1, sizeof(*ep));
	cr_assert(dom && ep);
	ep->base.domain = dom;
	ep->up = &ibf_rdm_proto_upcalls;
	ep->sq_depth = 4;
	ep->max_inline = 64;	/* a PING goes inline */
	ep->nbounce = 16;
	ep->stop_fd = -1;
	ep->wake_fd = eventfd(0, EFD_NONBLOCK);
	pthread_mutex_init(&ep->cm_lock, NULL);
}

static void teardown(void)
{
	ibf_rdm_cm_destroy(&ep->as_conns);	/* graves, QP map, connections, wake_fd */
	pthread_mutex_destroy(&ep->cm_lock);
	free(ep);
	free(dom);
}

TestSuite(rdm_cm, .init = setup, .fini = teardown);

/* A connection to the peer, our connect out (its address resolving). */
static struct ibf_rdm_conn *connecting(void)
{
	struct ibf_rdm_conn *conn = ibf_rdm_conn_new(&ep->as_conns, &peer, 0);

	cr_assert_not_null(conn);
	cr_assert_eq(ibf_rdm_conn_start(conn), 0);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING);
	cr_assert_eq(conn->id, &ids[0]);
	return conn;
}

/* An event on id, with private data pd (len bytes). */
static void event(struct rdma_cm_id *id, enum rdma_cm_event_type type,
		  int status, const void *pd, uint8_t len)
{
	struct rdma_cm_event ev = { .id = id, .event = type, .status = status };

	ev.param.conn.private_data = pd;
	ev.param.conn.private_data_len = len;
	pthread_mutex_lock(&ep->cm_lock);
	ibf_rdm_cm_event(&ep->as_conns, &ev);
	pthread_mutex_unlock(&ep->cm_lock);
}

/* The peer's connect request arrives on a new id, from its address. */
static struct rdma_cm_id *request_from_peer(void)
{
	struct rdma_cm_id *id = &ids[nids++];
	struct ibf_rdm_cm_data d = { .magic = IBF_RDM_CM_MAGIC, .conn = 9,
				     .name = peer, .window = 8 };
	struct sockaddr_storage ss;

	ibf_name_sockaddr(&peer, &ss);
	memcpy(&id->route.addr.dst_storage, &ss, sizeof(ss));
	event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &d, sizeof(d));
	return id;
}

/* The accepting peer's answer, as an ESTABLISHED event carries it. */
static void established(struct rdma_cm_id *id)
{
	struct ibf_rdm_cm_data d = { .magic = IBF_RDM_CM_MAGIC, .conn = 9,
				     .name = peer, .window = 8 };

	event(id, RDMA_CM_EVENT_ESTABLISHED, 0, &d, sizeof(d));
}

static void timers(void)
{
	pthread_mutex_lock(&ep->cm_lock);
	ibf_rdm_timers_due(&ep->as_conns);
	pthread_mutex_unlock(&ep->cm_lock);
}

static int grave_of(const struct rdma_cm_id *id)
{
	const struct ibf_rdm_grave *g;

	for (g = ep->graves; g; g = g->next)
		if (g->id == id)
			return 1;
	return 0;
}

/*
 * Both sides connect at once and ours has the lower name: we keep our
 * connect and refuse theirs with the tie-break marker, which tells the
 * peer to accept ours instead.
 */
Test(rdm_cm, the_lower_name_keeps_its_connect)
{
	struct ibf_rdm_conn *conn;
	struct rdma_cm_id *theirs;

	names(1);
	conn = connecting();
	theirs = request_from_peer();
	cr_assert_eq(cm.rejects, 1);
	cr_assert_eq(cm.reject_magic, IBF_RDM_CM_TIEBREAK);
	cr_assert_eq(cm.accepts, 0);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING);
	cr_assert_eq(conn->id, &ids[0]);
	cr_assert(grave_of(theirs), "the refused request's id is buried");

	/* Ours goes on: route, QP, connect, and the peer's acceptance. */
	event(&ids[0], RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	event(&ids[0], RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	cr_assert_eq(cm.connects, 1);
	established(&ids[0]);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	cr_assert_eq(conn->window_max, 8, "the peer's window, from its answer");
	cr_assert_eq(ibf_rdm_qp_conn(&ep->as_conns, qps[0].qp_num), conn);
}

/*
 * The same race seen from the higher name: the peer's request is
 * accepted, our own attempt becomes the loser, and its end (the peer's
 * tie-break refusal) only buries it.
 */
Test(rdm_cm, the_higher_name_accepts_the_peers)
{
	struct ibf_rdm_conn *conn;
	struct rdma_cm_id *theirs;
	uint32_t tiebreak = IBF_RDM_CM_TIEBREAK;

	names(0);
	conn = connecting();
	theirs = request_from_peer();
	cr_assert_eq(cm.accepts, 1);
	cr_assert_eq(cm.rejects, 0);
	cr_assert_eq(conn->state, IBF_CONN_ACCEPTING);
	cr_assert_eq(conn->id, theirs);
	cr_assert_eq(conn->loser, &ids[0]);
	cr_assert_eq(conn->window_max, 8, "the requester's window");

	event(&ids[0], RDMA_CM_EVENT_REJECTED, 0, &tiebreak, sizeof(tiebreak));
	cr_assert_null(conn->loser);
	cr_assert(grave_of(&ids[0]));
	cr_assert_eq(conn->state, IBF_CONN_ACCEPTING, "the loser's end is not ours");

	event(theirs, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	cr_assert_eq(ibf_rdm_qp_conn(&ep->as_conns, theirs->qp->qp_num), conn);
}

/*
 * Refused with the tie-break marker: the peer's request is due, and we
 * wait for it.  If it does not come within the CM timeout we connect
 * again; once the connect timeout has passed, what waits fails with
 * -FI_ETIMEDOUT.
 */
Test(rdm_cm, the_loser_waits_then_tries_again_then_gives_up)
{
	struct ibf_rdm_conn *conn;
	uint32_t tiebreak = IBF_RDM_CM_TIEBREAK;
	struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM, .state = IBF_RDM_QUEUED };

	names(0);
	conn = connecting();
	event(&ids[0], RDMA_CM_EVENT_REJECTED, 0, &tiebreak, sizeof(tiebreak));
	cr_assert_eq(conn->state, IBF_CONN_WAITING);
	cr_assert_null(conn->id);
	cr_assert(conn->retry_at_ns > ibf_now_ns(), "not at once");
	timers();
	cr_assert_eq(conn->state, IBF_CONN_WAITING, "its timer is not due yet");

	conn->retry_at_ns = 0;	/* the CM timeout has passed */
	timers();
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING);
	cr_assert_eq(conn->id, &ids[1]);
	cr_assert_eq(cm.resolves, 2);

	/* Refused so again, and now the connect timeout is over too. */
	op.ep = &ep->as_ops;
	conn->queue_head = conn->queue_tail = &op;
	event(&ids[1], RDMA_CM_EVENT_REJECTED, 0, &tiebreak, sizeof(tiebreak));
	cr_assert_eq(conn->state, IBF_CONN_WAITING);
	conn->retry_at_ns = 0;
	conn->retry_until_ns = 0;
	timers();
	cr_assert_eq(conn->state, IBF_CONN_IDLE);
	cr_assert_eq(ep->failed.head, &op, "the queued send fails");
	cr_assert_eq(op.op.err, -FI_ETIMEDOUT);
	cr_assert_null(conn->queue_head);
	ep->failed.head = ep->failed.tail = NULL;
}

/*
 * Nothing listens at the peer's address yet (an RDM peer that starts a
 * little later is no error): tried again after a pause that doubles.
 */
Test(rdm_cm, no_listener_is_retried_with_doubling_pauses)
{
	struct ibf_rdm_conn *conn;
	uint64_t before;

	names(1);
	conn = connecting();
	before = ibf_now_ns();
	event(&ids[0], RDMA_CM_EVENT_REJECTED, 8 /* no listener */, NULL, 0);
	cr_assert_eq(conn->state, IBF_CONN_RETRY);
	cr_assert_geq(conn->retry_at_ns, before + 10 * 1000000ull);
	cr_assert_eq(conn->retry_pause_ms, 20);
	conn->retry_at_ns = 0;
	timers();
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING);
	event(&ids[1], RDMA_CM_EVENT_REJECTED, 8, NULL, 0);
	cr_assert_eq(conn->state, IBF_CONN_RETRY);
	cr_assert_eq(conn->retry_pause_ms, 40);
}

/*
 * A request naming a peer we are connected to never replaces the live
 * connection (anyone on the peer's host may claim its name): it is
 * refused BUSY, and the connection is probed with a PING, so that a peer
 * that died and came back ends the old one and is taken on its retry.
 */
Test(rdm_cm, a_live_connection_is_not_replaced_by_a_request)
{
	struct ibf_rdm_conn *conn;

	names(1);
	conn = connecting();
	event(&ids[0], RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	event(&ids[0], RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	established(&ids[0]);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	request_from_peer();
	cr_assert_eq(cm.rejects, 1);
	cr_assert_eq(cm.reject_magic, IBF_RDM_CM_BUSY);
	cr_assert_eq(conn->id, &ids[0]);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	cr_assert_eq(cm.sends, 1, "the PING");
}

/* A request whose name is not on the host it came from is refused. */
Test(rdm_cm, a_request_claiming_another_hosts_name_is_refused)
{
	struct rdma_cm_id *id = &ids[nids++];
	struct ibf_name elsewhere = name_of(3, 7000, 0x3333);
	struct ibf_rdm_cm_data d = { .magic = IBF_RDM_CM_MAGIC, .name = elsewhere };
	struct sockaddr_storage ss;

	names(1);
	ibf_name_sockaddr(&peer, &ss);	/* it comes from the peer's host */
	memcpy(&id->route.addr.dst_storage, &ss, sizeof(ss));
	event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &d, sizeof(d));
	cr_assert_eq(cm.rejects, 1);
	cr_assert_eq(cm.reject_magic, IBF_RDM_CM_REFUSED, "final: no retry");
	cr_assert_eq(cm.accepts, 0);
	cr_assert_eq(ep->nconns, 0, "no record for it");
}

/*
 * A refusal that is not an ibfab peer's final one (the CM's own, from a
 * peer whose id went away or whose CM gave up on our answer) is tried
 * again; IBF_RDM_CM_REFUSED fails what waits.
 */
Test(rdm_cm, only_a_refusal_marked_final_fails_the_queue)
{
	uint32_t refused = IBF_RDM_CM_REFUSED;
	struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM, .state = IBF_RDM_QUEUED,
				 .ep = &ep->as_ops };
	struct ibf_rdm_conn *conn;

	names(1);
	conn = connecting();
	conn->queue_head = conn->queue_tail = &op;
	event(&ids[0], RDMA_CM_EVENT_REJECTED, 28 /* consumer */, NULL, 0);
	cr_assert_eq(conn->state, IBF_CONN_RETRY);
	cr_assert_eq(conn->queue_head, &op, "kept for the retry");
	conn->retry_at_ns = 0;
	timers();
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING);
	event(&ids[1], RDMA_CM_EVENT_REJECTED, 28, &refused, sizeof(refused));
	cr_assert_eq(conn->state, IBF_CONN_IDLE);
	cr_assert_eq(ep->failed.head, &op);
	cr_assert_eq(op.op.err, -FI_ECONNREFUSED);
	ep->failed.head = ep->failed.tail = NULL;
}

/*
 * We accepted the peer's request but it never completed (its CM gave up
 * waiting for our answer): no connection came of it, so what is queued
 * for the peer is kept and we connect ourselves.  With nothing queued
 * the record just ends.
 */
Test(rdm_cm, an_accepted_request_that_never_completes_connects_anew)
{
	static const enum rdma_cm_event_type evs[] = {
		RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_UNREACHABLE,
		RDMA_CM_EVENT_REJECTED,
	};
	struct ibf_rdm_conn *conn;
	struct rdma_cm_id *theirs;
	size_t i;

	for (i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
		struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM,
					 .state = IBF_RDM_QUEUED, .ep = &ep->as_ops };

		teardown();
		setup();
		names(0);
		conn = connecting();
		theirs = request_from_peer();
		cr_assert_eq(conn->state, IBF_CONN_ACCEPTING);
		conn->queue_head = conn->queue_tail = &op;
		event(theirs, evs[i], 4, NULL, 0);
		cr_assert_eq(conn->state, IBF_CONN_CONNECTING, "%s: %s",
			     rdma_event_str(evs[i]), ibf_conn_state_name(conn->state));
		cr_assert_eq(conn->queue_head, &op, "kept for our own connect");
		cr_assert_null(ep->failed.head);
		cr_assert(grave_of(theirs));
		cr_assert_eq(conn->id, &ids[nids - 1], "a new attempt");
		cr_assert(conn->retry_until_ns > ibf_now_ns());
		conn->queue_head = conn->queue_tail = NULL;
	}

	/* Nothing queued: the record ends, and no attempt is made. */
	teardown();
	setup();
	names(0);
	conn = connecting();
	theirs = request_from_peer();
	event(theirs, RDMA_CM_EVENT_CONNECT_ERROR, 0, NULL, 0);
	cr_assert_eq(conn->state, IBF_CONN_IDLE);
	cr_assert_null(conn->id);
	cr_assert_eq(cm.resolves, 1);
}

/*
 * A peer that shows it is there and busy with us restarts the connect
 * time limit, for the attempt under way too: in a storm of first sends a
 * live peer may take longer than the limit to get to our request.  Signs
 * of life: its request crossing ours (refused by the tie-break), its
 * tie-break refusal of ours, its CM giving up on our answer (reject
 * reason 4).  Nothing listening there (reason 8) is no such sign.
 */
Test(rdm_cm, a_peer_that_shows_it_is_there_restarts_the_time_limit)
{
	uint32_t tiebreak = IBF_RDM_CM_TIEBREAK;
	struct ibf_rdm_conn *conn;
	uint64_t limit = (uint64_t)ibf_params.rdm_connect_ms * 1000000u, until;

	names(1);
	conn = connecting();
	conn->retry_until_ns = conn->retry_at_ns = ibf_now_ns() + 1000;
	request_from_peer();
	cr_assert_eq(cm.reject_magic, IBF_RDM_CM_TIEBREAK);
	cr_assert_geq(conn->retry_until_ns, ibf_now_ns() + limit / 2);
	cr_assert_geq(conn->retry_at_ns, conn->retry_until_ns,
		      "the attempt under way waits as long");

	conn->retry_until_ns = 1;
	event(&ids[0], RDMA_CM_EVENT_REJECTED, 4, NULL, 0);
	cr_assert_eq(conn->state, IBF_CONN_RETRY);
	cr_assert_geq(conn->retry_until_ns, ibf_now_ns() + limit / 2);

	conn->retry_until_ns = 1;
	conn->retry_at_ns = 0;
	timers();
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING, "the limit is not past");
	event(&ids[nids - 1], RDMA_CM_EVENT_REJECTED, 0, &tiebreak, sizeof(tiebreak));
	cr_assert_eq(conn->state, IBF_CONN_WAITING);
	cr_assert_geq(conn->retry_until_ns, ibf_now_ns() + limit / 2);

	conn->retry_at_ns = 0;	/* the winner's request never came */
	timers();
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING);
	conn->retry_until_ns = until = ibf_now_ns() + limit / 4;
	event(&ids[nids - 1], RDMA_CM_EVENT_REJECTED, 8, NULL, 0);
	cr_assert_eq(conn->state, IBF_CONN_RETRY);
	cr_assert_eq(conn->retry_until_ns, until, "no listener: no sign of life");
}

/*
 * Our request's answer is due a connect time limit after the request
 * went out, not after the attempt began: a node whose threads got to the
 * resolve steps late leaves the answer its whole time.  Unanswered then,
 * what waits fails (a peer that is gone, on an idle node).
 */
Test(rdm_cm, the_answer_is_due_a_limit_after_the_request)
{
	struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM, .state = IBF_RDM_QUEUED,
				 .ep = &ep->as_ops };
	uint64_t limit = (uint64_t)ibf_params.rdm_connect_ms * 1000000u, sent;
	struct ibf_rdm_conn *conn;

	names(1);
	conn = connecting();
	conn->queue_head = conn->queue_tail = &op;
	/* The round began most of a limit ago, the steps were quick. */
	conn->retry_first_ns -= limit * 9 / 10;
	conn->retry_until_ns -= limit * 9 / 10;
	conn->retry_at_ns = conn->retry_until_ns;
	conn->step_ns = ibf_now_ns();
	event(&ids[0], RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	event(&ids[0], RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	sent = ibf_now_ns();
	cr_assert_eq(cm.connects, 1);
	cr_assert_geq(conn->retry_at_ns, sent + limit * 9 / 10,
		      "a limit from the request, not from the round's start");
	cr_assert_leq(conn->retry_at_ns, sent + limit + limit / 10,
		      "no longer on an idle node");
	timers();
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING, "not due yet");
	conn->step_ns -= limit + 1;	/* a limit has passed since */
	conn->retry_at_ns = 1;
	timers();
	cr_assert_eq(conn->state, IBF_CONN_IDLE);
	cr_assert_eq(ep->failed.head, &op, "unanswered: what waits fails");
	cr_assert_eq(op.op.err, -FI_ETIMEDOUT);
	ep->failed.head = ep->failed.tail = NULL;
}

/* FI_IBFAB_RDM_CONNECT_TIMEOUT=0 tries once: that try still has two CM
 * timeouts to resolve and be answered. */
Test(rdm_cm, a_single_try_has_two_cm_timeouts)
{
	uint64_t before = ibf_now_ns();
	struct ibf_rdm_conn *conn;

	ibf_params.rdm_connect_ms = 0;
	names(1);
	conn = connecting();
	cr_assert_geq(conn->retry_at_ns,
		      before + 2 * (uint64_t)ibf_params.cm_timeout_ms * 1000000u);
}

/*
 * On a node whose CM steps are slow (many processes connecting at once on
 * few CPUs), the peers' are as slow: an answer is waited for several of
 * the slowest recent steps, up to five limits from the round's first try.
 * A slow step long past no longer counts.
 */
Test(rdm_cm, a_slow_node_waits_longer_for_an_answer)
{
	uint64_t limit = (uint64_t)ibf_params.rdm_connect_ms * 1000000u, now;
	struct ibf_rdm_conn *conn;

	names(1);
	conn = connecting();
	event(&ids[0], RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	cr_assert_lt(ep->cm_lag_ns, limit / 2);
	conn->step_ns = ibf_now_ns() - 2 * limit;	/* the route took two */
	event(&ids[0], RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	cr_assert_geq(ep->cm_lag_ns, 2 * limit);
	now = ibf_now_ns();
	cr_assert_geq(conn->retry_at_ns, now + 3 * limit,
		      "several slow steps, not one limit");
	cr_assert_leq(conn->retry_at_ns, conn->retry_first_ns + 5 * limit,
		      "but not past five limits of the round");
	conn->step_ns = ibf_now_ns() - 3 * limit;	/* the answer took three */
	established(&ids[0]);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	cr_assert_geq(ep->cm_lag_ns, 3 * limit, "an answer is a step too");

	/* Another peer, a limit and more later: its quick steps count. */
	ep->cm_lag_at_ns = ibf_now_ns() - limit - 1;
	peer = name_of(2, 7472, 0x1234567887654321ull);
	conn = ibf_rdm_conn_new(&ep->as_conns, &peer, 0);
	cr_assert_not_null(conn);
	cr_assert_eq(ibf_rdm_conn_start(conn), 0);
	event(conn->id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	cr_assert_lt(ep->cm_lag_ns, limit / 2, "the slow step is past");
	event(conn->id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	cr_assert_leq(conn->retry_at_ns, ibf_now_ns() + limit + limit / 10);

	/* Its request went out before steps got slow: when its time is up
	 * it waits as long as a request sent now would, and the thread
	 * wakes for it. */
	ep->cm_lag_ns = limit;
	ep->cm_lag_at_ns = ibf_now_ns();
	conn->retry_at_ns = 1;
	pthread_mutex_lock(&ep->cm_lock);
	cr_assert_gt(ibf_rdm_timers_due(&ep->as_conns), 0, "a timer to wake for");
	pthread_mutex_unlock(&ep->cm_lock);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTING);
	cr_assert_geq(conn->retry_at_ns, ibf_now_ns() + 2 * limit);
}

/* How the connection ends when an event says the peer is gone, in each
 * state it can be in: its error, and whether it is tried again. */
struct vanish {
	const char *state;
	enum rdma_cm_event_type event;
	enum ibf_conn_state after;
	int err;		/* what the queued send fails with, 0: none */
};

static void vanish(const struct vanish *v)
{
	struct ibf_rdm_conn *conn;
	struct rdma_cm_id *id;
	struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM, .state = IBF_RDM_QUEUED,
				 .ep = &ep->as_ops };

	/* Accepting: the peer's request wins the race (ours is higher). */
	names(strcmp(v->state, "accepting") != 0);
	conn = connecting();
	id = &ids[0];
	if (!strcmp(v->state, "connected") || !strcmp(v->state, "routed")) {
		event(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
		event(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	}
	if (!strcmp(v->state, "connected"))
		established(id);
	if (!strcmp(v->state, "accepting")) {
		id = request_from_peer();
		cr_assert_eq(conn->state, IBF_CONN_ACCEPTING);
	}
	conn->queue_head = conn->queue_tail = &op;
	event(id, v->event, 0, NULL, 0);
	cr_assert_eq(conn->state, v->after, "%s, %s: state %s", v->state,
		     rdma_event_str(v->event), ibf_conn_state_name(conn->state));
	if (v->err) {
		cr_assert_eq(ep->failed.head, &op, "%s, %s", v->state,
			     rdma_event_str(v->event));
		cr_assert_eq(op.op.err, v->err, "%s, %s: %d", v->state,
			     rdma_event_str(v->event), op.op.err);
		ep->failed.head = ep->failed.tail = NULL;
	} else {
		cr_assert_eq(conn->queue_head, &op, "kept for the retry");
		conn->queue_head = conn->queue_tail = NULL;
	}
	cr_assert_null(conn->id);
}

Test(rdm_cm, a_peer_that_vanishes_ends_the_connection_in_each_state)
{
	static const struct vanish cases[] = {
		{ "resolving", RDMA_CM_EVENT_ADDR_ERROR, IBF_CONN_RETRY, 0 },
		{ "resolving", RDMA_CM_EVENT_ROUTE_ERROR, IBF_CONN_RETRY, 0 },
		/* Our request timed out, or its answer was unusable: the
		 * peer is not connected by it, so it is tried again. */
		{ "routed", RDMA_CM_EVENT_UNREACHABLE, IBF_CONN_RETRY, 0 },
		{ "routed", RDMA_CM_EVENT_CONNECT_ERROR, IBF_CONN_RETRY, 0 },
		{ "accepting", RDMA_CM_EVENT_DISCONNECTED, IBF_CONN_IDLE, -FI_ECONNABORTED },
		{ "connected", RDMA_CM_EVENT_DISCONNECTED, IBF_CONN_IDLE, -FI_ECONNABORTED },
		{ "connected", RDMA_CM_EVENT_DEVICE_REMOVAL, IBF_CONN_IDLE, -FI_ECONNABORTED },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		teardown();
		setup();
		vanish(&cases[i]);
	}
}

/*
 * A QP map that fills with tombstones is replaced by the connection
 * thread, which cannot know whether progress is looking something up in
 * the old one: it keeps it as retired and tells progress (cm_pending),
 * whose next call frees it (ibf_rdm_cm_deliver).  Nothing is freed
 * before, and the new map still finds the live QP.
 */
Test(rdm_cm, a_replaced_qp_map_is_freed_by_the_next_progress)
{
	struct ibf_rdm_conn *conn = ibf_rdm_conn_new(&ep->as_conns, &peer, 0);
	struct ibf_qp_map *first;
	int i;

	cr_assert_not_null(conn);
	cr_assert_eq(ibf_rdm_qp_create(conn, &ids[0]), 0);
	first = ep->qp_map;
	cr_assert_eq(ep->cm_pending, 0, "a first map replaces nothing");
	/* QPs made and destroyed, each with a number of its own, until
	 * their tombstones fill the first map. */
	for (i = 1; ep->qp_map == first; i++) {
		cr_assert_lt(i, 64, "the map was never replaced");
		ibf_rdm_qp_map_del(&ep->as_conns, qps[(i - 1) % 2].qp_num);
		qps[i % 2].qp_num = 0x1000u + (uint32_t)i;
		cr_assert_eq(ibf_rdm_qp_create(conn, &ids[i % 2]), 0);
	}
	cr_assert_eq(ep->qp_map->retired, first, "kept until progress");
	cr_assert_eq(ep->cm_pending, 1, "progress is told");
	cr_assert_eq(ibf_rdm_qp_conn(&ep->as_conns, conn->qp_num), conn);
	ibf_rdm_cm_deliver(&ep->as_conns);
	cr_assert_null(ep->qp_map->retired, "freed (ASan would see it twice)");
	cr_assert_eq(ep->cm_pending, 0);
	cr_assert_eq(ibf_rdm_qp_conn(&ep->as_conns, conn->qp_num), conn);
}
