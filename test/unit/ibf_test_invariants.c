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
#include <unistd.h>

#include <criterion/criterion.h>

#include "ibf_rdm.h"

#ifdef NDEBUG

Test(invariants, checked_in_test_builds_only)
{
	cr_skip_test("built without --enable-debug: asserts compiled out");
}

#else

/*
 * Run what(arg) in a child process with SIGABRT's default action (not
 * Criterion's crash handler): whether it died of an assert.
 */
static int aborts(void (*what)(void *arg), void *arg)
{
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (!pid) {
		signal(SIGABRT, SIG_DFL);
		what(arg);
		_exit(0);	/* the invariant was not checked */
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static struct ibf_rdm_ep *fake_ep(void)
{
	struct ibf_rdm_ep *ep = calloc(1, sizeof(*ep));

	cr_assert_not_null(ep);
	return ep;	/* its lock is off (zeroed): no threading level */
}

static void release(void *op)
{
	ibf_rdm_release(&((struct ibf_rdm_op *)op)->op);
}

static void op_free(void *op)
{
	ibf_rdm_op_free(op);
}

static void retire(void *op)
{
	ibf_ring_retire(op);
}

/* An application's read is what releases an op: one not completed yet
 * (still posted, say) must not go back to the pool. */
Test(invariants, releasing_an_op_not_completed_aborts)
{
	struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM, .ep = fake_ep(),
				 .state = IBF_RDM_RX_POSTED };

	cr_assert(aborts(release, &op));
	free(op.ep);
}

/* An op freed twice would sit in the free list twice. */
Test(invariants, freeing_a_free_op_aborts)
{
	struct ibf_rdm_op op = { .op.kind = IBF_OP_RDM, .ep = fake_ep(),
				 .state = IBF_RDM_FREE };

	cr_assert(aborts(op_free, &op));
	free(op.ep);
}

/* A completion retires slots of its own ring only. */
Test(invariants, retiring_a_slot_of_another_ring_aborts)
{
	static struct ibf_op ops[4], other[4];
	struct ibf_ring ring = { .ops = ops, .size = 4 };

	other[1].ring = &ring;
	cr_assert(aborts(retire, &other[1]));
	ops[1].ring = &ring;	/* its own slot retires */
	cr_assert(!aborts(retire, &ops[1]));
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
