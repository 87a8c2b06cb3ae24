/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Invariants the provider asserts in test builds (--enable-debug, and the
 * ASan and TSan builds CI runs): breaking one stops the process where it
 * broke instead of corrupting what comes after.  A build without them
 * (NDEBUG in config.h) skips these.
 */
#include "config.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "ibf_msg.h"
#include "ibf_rdm.h"
#include "ibf_test_child.h"

/* Every op state has a name for the logs. */
Test(op_life, op_states_are_named)
{
	int s;

	for (s = 0; s < IBF_RDM_OP_STATES; s++)
		cr_assert_str_neq(ibf_rdm_op_state_name(s), "?", "state %d", s);
	cr_assert_str_eq(ibf_rdm_op_state_name(IBF_RDM_OP_STATES), "?");
}

/* And every FI_EP_MSG endpoint state, for its debug log. */
Test(op_life, msg_endpoint_states_are_named)
{
	int s;

	for (s = 0; s < IBF_EP_STATES; s++)
		cr_assert_str_neq(ibf_ep_state_name(s), "?", "state %d", s);
	cr_assert_str_eq(ibf_ep_state_name(IBF_EP_STATES), "?");
}

/* Each step of a life, in order, is a move the table allows. */
static void lives(const enum ibf_rdm_op_state *life, int n)
{
	int i;

	for (i = 1; i < n; i++)
		cr_assert(ibf_rdm_op_move_ok(life[i - 1], life[i]),
			  "%s -> %s", ibf_rdm_op_state_name(life[i - 1]),
			  ibf_rdm_op_state_name(life[i]));
}
#define LIFE(...) do { \
	const enum ibf_rdm_op_state l_[] = { __VA_ARGS__ }; \
	lives(l_, (int)(sizeof(l_) / sizeof(l_[0]))); \
} while (0)

/* The lives the engine leads (those the suite in the guest showed, with
 * every assert on) are allowed. */
Test(op_life, the_engine_lives_are_allowed)
{
	LIFE(IBF_RDM_FREE, IBF_RDM_NEW, IBF_RDM_TX, IBF_RDM_FREE);
	LIFE(IBF_RDM_FREE, IBF_RDM_NEW, IBF_RDM_QUEUED, IBF_RDM_TX_RTS,
	     IBF_RDM_TX_RTS, IBF_RDM_FREE);
	LIFE(IBF_RDM_NEW, IBF_RDM_QUEUED, IBF_RDM_FREE);	/* peer gone */
	LIFE(IBF_RDM_NEW, IBF_RDM_TX_KEYQ, IBF_RDM_TX_RMA, IBF_RDM_TX_RMA,
	     IBF_RDM_FREE);
	LIFE(IBF_RDM_NEW, IBF_RDM_TX_ATOMIC, IBF_RDM_FREE);
	LIFE(IBF_RDM_NEW, IBF_RDM_RX_POSTED, IBF_RDM_RX_READ, IBF_RDM_FREE);
	LIFE(IBF_RDM_FREE, IBF_RDM_BOUNCE_POSTED, IBF_RDM_BOUNCE_POSTED,
	     IBF_RDM_BOUNCE_HELD, IBF_RDM_BOUNCE_CLAIMED, IBF_RDM_BOUNCE_HELD,
	     IBF_RDM_BOUNCE_FIN, IBF_RDM_BOUNCE_SPARE, IBF_RDM_BOUNCE_POSTED);
	LIFE(IBF_RDM_FREE, IBF_RDM_GRANT, IBF_RDM_FREE, IBF_RDM_PROBE,
	     IBF_RDM_FREE);
}

/* What would lose or corrupt an op is refused. */
Test(op_life, broken_lives_are_refused)
{
	static const enum ibf_rdm_op_state bad[][2] = {
		{ IBF_RDM_FREE, IBF_RDM_FREE },		/* freed twice */
		{ IBF_RDM_FREE, IBF_RDM_TX },		/* posted, never taken */
		{ IBF_RDM_RX_POSTED, IBF_RDM_TX },	/* a receive sent */
		{ IBF_RDM_TX, IBF_RDM_RX_READ },	/* a send reads */
		{ IBF_RDM_TX_ATOMIC, IBF_RDM_TX_RMA },
		{ IBF_RDM_BOUNCE_POSTED, IBF_RDM_FREE },	/* a bounce to a free list */
		{ IBF_RDM_BOUNCE_HELD, IBF_RDM_FREE },
		{ IBF_RDM_BOUNCE_SPARE, IBF_RDM_BOUNCE_HELD },	/* held off the SRQ */
		{ IBF_RDM_DRAIN, IBF_RDM_FREE },	/* a drain is the grave's */
		{ IBF_RDM_OP_STATES, IBF_RDM_FREE },	/* no state */
		{ IBF_RDM_FREE, IBF_RDM_OP_STATES },
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert(!ibf_rdm_op_move_ok(bad[i][0], bad[i][1]), "%s -> %s",
			  ibf_rdm_op_state_name(bad[i][0]),
			  ibf_rdm_op_state_name(bad[i][1]));
}

/* A connection's life: what the engine does is allowed, what would
 * replace a live connection or skip its setup is not. */
Test(op_life, connection_lives)
{
	static const enum ibf_conn_state ok[][2] = {
		{ IBF_CONN_IDLE, IBF_CONN_CONNECTING },
		{ IBF_CONN_CONNECTING, IBF_CONN_WAITING },	/* lost the race */
		{ IBF_CONN_WAITING, IBF_CONN_ACCEPTING },	/* the winner came */
		{ IBF_CONN_CONNECTING, IBF_CONN_RETRY },
		{ IBF_CONN_RETRY, IBF_CONN_CONNECTING },
		{ IBF_CONN_ACCEPTING, IBF_CONN_CONNECTED },
		{ IBF_CONN_CONNECTED, IBF_CONN_CONNECTED },	/* queue drained */
		{ IBF_CONN_CONNECTED, IBF_CONN_IDLE },
	};
	static const enum ibf_conn_state bad[][2] = {
		{ IBF_CONN_IDLE, IBF_CONN_CONNECTED },		/* no setup */
		{ IBF_CONN_CONNECTED, IBF_CONN_ACCEPTING },	/* replaced */
		{ IBF_CONN_ACCEPTING, IBF_CONN_CONNECTING },
		{ IBF_CONN_WAITING, IBF_CONN_CONNECTED },
		{ IBF_CONN_IDLE, IBF_CONN_IDLE },		/* ended twice */
		{ IBF_CONN_STATES, IBF_CONN_IDLE },
	};
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		cr_assert(ibf_conn_move_ok(ok[i][0], ok[i][1]), "%s -> %s",
			  ibf_conn_state_name(ok[i][0]), ibf_conn_state_name(ok[i][1]));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert(!ibf_conn_move_ok(bad[i][0], bad[i][1]), "%s -> %s",
			  ibf_conn_state_name(bad[i][0]), ibf_conn_state_name(bad[i][1]));
}

#ifdef NDEBUG

Test(invariants, checked_in_test_builds_only)
{
	cr_skip_test("built without --enable-debug: asserts compiled out");
}

#else

struct call {
	void (*what)(void *arg);
	void *arg;
};

static int call(void *p)
{
	struct call *c = p;

	c->what(c->arg);
	return 0;	/* the invariant was not checked */
}

/* Run what(arg) in a child process: whether it died of an assert. */
static int aborts(void (*what)(void *arg), void *arg)
{
	struct call c = { what, arg };
	int status = ibf_test_child(call, &c);

	cr_assert_neq(status, -1, "the child did not start, or hung");
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static struct ibf_rdm_ep_ops *fake_ep(void)
{
	struct ibf_rdm_ep *ep = calloc(1, sizeof(*ep));

	cr_assert_not_null(ep);
	return &ep->as_ops;	/* its lock is off (zeroed): no threading level */
}

static void op_free(void *op)
{
	ibf_rdm_op_free(op);
}

static void retire(void *op)
{
	ibf_ring_retire(op);
}

/* An op freed twice would sit in the free list twice. */
Test(invariants, freeing_a_free_op_aborts)
{
	struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM, .ep = fake_ep(),
				 .state = IBF_RDM_FREE };

	cr_assert(aborts(op_free, &op));
	free(op.ep);
}

static void complete(void *op)
{
	ibf_rdm_complete(op, -FI_EIO);
}

/* A completion of an op that was never posted (nor queued) asserts. */
Test(invariants, completing_an_op_never_posted_aborts)
{
	struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM, .ep = fake_ep(),
				 .state = IBF_RDM_NEW, .op.context = &op };

	cr_assert(aborts(complete, &op));
	op.state = IBF_RDM_FREE;	/* or completed twice */
	cr_assert(aborts(complete, &op));
	free(op.ep);
}

/* A completion retires slots of its own ring only. */
Test(invariants, retiring_a_slot_of_another_ring_aborts)
{
	static struct ibf_op ops[4], other[4];
	static struct ibf_ring ring;	/* as long-lived as the ops naming it */

	ibf_ring_set(&ring, ops, 4);
	other[1].ring = &ring;	/* claims the ring and an index in it */
	other[1].slot = 1;
	cr_assert(aborts(retire, &other[1]));
	cr_assert(!aborts(retire, &ops[1]));	/* its own slot retires */
}

/* Every connection state has a name for the logs. */
Test(invariants, connection_states_are_named)
{
	int s;

	for (s = 0; s < IBF_CONN_STATES; s++)
		cr_assert_str_neq(ibf_conn_state_name(s), "?", "state %d", s);
	cr_assert_str_eq(ibf_conn_state_name(IBF_CONN_STATES), "?");
}

#endif
