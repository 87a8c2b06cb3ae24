/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibf_test_child(): a forked child under a deadline (ibf_test_child.h).
 *
 * Under AddressSanitizer a child can hang through no fault of the code
 * under test: GCC 12's ASan takes no fork handler for its allocator's
 * locks, so a child forked while another thread of the parent is inside
 * the allocator hangs at its first malloc or free.  Seen in mr_cache's
 * fork test: the parent's monitor thread, started just before, was still
 * in its start-up (pthread_getattr_np frees); a CI run sat 80 minutes in
 * the ASan unit tests.  Criterion's own thread in the test process
 * allocates too.  Under ASan, and only there, a hung child is tried
 * again; in other builds a hang is the test's failure.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ibf_test_child.h"

#if defined(__SANITIZE_ADDRESS__)
#define IBF_TEST_CHILD_TRIES 4	/* 34 hangs in 370 forks, none twice */
#else
#define IBF_TEST_CHILD_TRIES 1
#endif

/* One child: its wait status, or -1 (not started, or killed as hung). */
static int ibf_test_child_once(int (*fn)(void *arg), void *arg)
{
	struct timespec now, end;
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* Not left behind if the test process is killed. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGABRT, SIG_DFL);
		_exit(fn(arg));
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += IBF_TEST_CHILD_SECONDS;
	do {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec ||
		 (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

int ibf_test_child(int (*fn)(void *arg), void *arg)
{
	int tries, status = -1;

	for (tries = 0; tries < IBF_TEST_CHILD_TRIES; tries++) {
		status = ibf_test_child_once(fn, arg);
		if (status != -1)
			break;
		fprintf(stderr, "ibf_test_child: the child did not start or finish (try %d of %d)\n",
			tries + 1, IBF_TEST_CHILD_TRIES);
	}
	return status;
}
