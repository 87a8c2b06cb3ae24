/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Named (FI_SHARED_AV) address vectors, with no device: a second creator
 * shares a live AV instead of truncating it, and an existing file is
 * used only if it is this user's, writable by nobody else, and its
 * header, size and counts agree (a reader must not trust a count).
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fi_domain.h>

#include "ibf_rdm.h"

static struct ibf_domain dom;
static char name[64], path[80];

static void setup(void)
{
	memset(&dom, 0, sizeof(dom));
	dom.info = fi_allocinfo();
	dom.info->addr_format = FI_SOCKADDR_IN;
	snprintf(name, sizeof(name), "unit-%d", (int)getpid());
	snprintf(path, sizeof(path), "/ibfab-av-%s", name);
	shm_unlink(path);
}

static void teardown(void)
{
	shm_unlink(path);
	fi_freeinfo(dom.info);
}

TestSuite(av_shared, .init = setup, .fini = teardown);

static int av_open(uint64_t flags, size_t count, struct fid_av **av)
{
	struct fi_av_attr attr = { .type = FI_AV_TABLE, .name = name,
				   .flags = flags, .count = count };

	return ibf_av_open(&dom.domain_fid, &attr, av, NULL);
}

static struct sockaddr_in addr(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };

	sin.sin_addr.s_addr = htonl(0x0a000001);
	return sin;
}

Test(av_shared, second_creator_shares_not_truncates)
{
	struct fid_av *a, *b, *r;
	struct sockaddr_in s1 = addr(1000), s2 = addr(2000), out;
	fi_addr_t f1, f2;
	size_t len = sizeof(out);

	cr_assert_eq(av_open(0, 16, &a), 0);
	cr_assert_eq(fi_av_insert(a, &s1, 1, &f1, 0, NULL), 1);
	/* Another process (or endpoint) opens the same name to write. */
	cr_assert_eq(av_open(0, 16, &b), 0);
	cr_assert_eq(fi_av_lookup(a, f1, &out, &len), 0,
		     "the first creator's entry is gone");
	cr_assert_eq(out.sin_port, s1.sin_port);
	cr_assert_eq(fi_av_insert(b, &s2, 1, &f2, 0, NULL), 1);
	cr_assert_neq(f2, f1, "the second writer reused a live slot");
	cr_assert_eq(av_open(FI_READ, 0, &r), 0);
	len = sizeof(out);
	cr_assert_eq(fi_av_lookup(r, f2, &out, &len), 0);
	cr_assert_eq(out.sin_port, s2.sin_port);
	fi_close(&r->fid);
	fi_close(&b->fid);
	fi_close(&a->fid);
}

/* Write a file as a hostile or careless process would leave it. */
static void plant(uint32_t magic, uint32_t addrlen, uint64_t count,
		  uint64_t cap, off_t size, mode_t mode, uid_t uid)
{
	uint64_t head[3] = { (uint64_t)addrlen << 32 | magic, count, cap };
	int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);

	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, size), 0);
	cr_assert_eq(pwrite(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
	cr_assert_eq(fchmod(fd, mode), 0);
	if (uid != geteuid())
		cr_assert_eq(fchown(fd, uid, (gid_t)-1), 0);
	close(fd);
}

/* One entry's bytes in the file layout: map, name, used. */
#define ENTRY (sizeof(fi_addr_t) + sizeof(struct ibf_name) + 1)
#define HEAD 24

Test(av_shared, huge_count_is_not_trusted)
{
	struct fid_av *r;
	struct sockaddr_in out;
	size_t len = sizeof(out);

	/* count 2^40, cap 1: the count would index far past the mapping. */
	plant(0x1bfa5a7eu, sizeof(struct sockaddr_in), 1ull << 40, 1,
	      HEAD + ENTRY, 0600, geteuid());
	if (av_open(FI_READ, 0, &r) == 0) {
		cr_assert_neq(fi_av_lookup(r, (1ull << 39), &out, &len), 0);
		cr_assert_neq(fi_av_lookup(r, 5, &out, &len), 0);
		fi_close(&r->fid);
	}
}

Test(av_shared, sizes_that_do_not_agree_are_refused)
{
	struct fid_av *r;

	/* cap * entry wraps to a small size. */
	plant(0x1bfa5a7eu, sizeof(struct sockaddr_in), 0, 1ull << 62, HEAD + ENTRY,
	      0600, geteuid());
	cr_assert_neq(av_open(FI_READ, 0, &r), 0);
	cr_assert_neq(av_open(0, 0, &r), 0, "a writer adopted it");
	shm_unlink(path);
	/* A file shorter than its capacity says. */
	plant(0x1bfa5a7eu, sizeof(struct sockaddr_in), 0, 64, HEAD + ENTRY,
	      0600, geteuid());
	cr_assert_neq(av_open(FI_READ, 0, &r), 0);
	shm_unlink(path);
	/* Addresses of another length. */
	plant(0x1bfa5a7eu, 28, 0, 1, HEAD + ENTRY, 0600, geteuid());
	cr_assert_neq(av_open(FI_READ, 0, &r), 0);
}

Test(av_shared, another_users_file_is_refused)
{
	struct fid_av *r;

	if (geteuid() != 0)
		cr_skip_test("planting another user's file needs root");
	plant(0x1bfa5a7eu, sizeof(struct sockaddr_in), 0, 1, HEAD + ENTRY,
	      0600, 65534);
	cr_assert_neq(av_open(0, 1, &r), 0, "a creator adopted another user's AV");
	cr_assert_neq(av_open(FI_READ, 0, &r), 0);
}

Test(av_shared, a_file_others_may_write_is_refused)
{
	struct fid_av *r;

	plant(0x1bfa5a7eu, sizeof(struct sockaddr_in), 0, 1, HEAD + ENTRY,
	      0666, geteuid());
	cr_assert_neq(av_open(0, 1, &r), 0);
	cr_assert_neq(av_open(FI_READ, 0, &r), 0);
}
