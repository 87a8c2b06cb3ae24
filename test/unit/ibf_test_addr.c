/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Socket address helpers: parsing, comparing, printing. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <string.h>

#include "ibf_msg.h"	/* the CM data frame (MSG wing) */

static struct sockaddr *sa(struct sockaddr_storage *ss)
{
	return (struct sockaddr *)ss;
}

Test(addr, resolve_ipv4_numeric)
{
	struct sockaddr_storage ss;

	cr_assert_eq(ibf_addr_resolve("198.18.0.1", "7471", 0, AF_UNSPEC, &ss), 0);
	cr_assert_eq(ss.ss_family, AF_INET);
	cr_assert_eq(ibf_addr_port(sa(&ss)), 7471);
	cr_assert_eq(ibf_addr_len(sa(&ss)), sizeof(struct sockaddr_in));
	cr_assert_eq(ibf_addr_format(sa(&ss)), FI_SOCKADDR_IN);
	cr_assert_eq(((struct sockaddr_in *)&ss)->sin_addr.s_addr, inet_addr("198.18.0.1"));
}

Test(addr, resolve_ipv6_numeric)
{
	struct sockaddr_storage ss;

	cr_assert_eq(ibf_addr_resolve("fd00::2", "9", 0, AF_UNSPEC, &ss), 0);
	cr_assert_eq(ss.ss_family, AF_INET6);
	cr_assert_eq(ibf_addr_format(sa(&ss)), FI_SOCKADDR_IN6);
	cr_assert_eq(ibf_addr_port(sa(&ss)), 9);
}

Test(addr, resolve_passive_service_only_is_any)
{
	struct sockaddr_storage ss;

	cr_assert_eq(ibf_addr_resolve(NULL, "7471", 1, AF_INET, &ss), 0);
	cr_assert(ibf_addr_is_any(sa(&ss)));
	cr_assert_eq(ibf_addr_port(sa(&ss)), 7471);
}

Test(addr, resolve_rejects_nothing_and_garbage)
{
	struct sockaddr_storage ss;

	cr_assert_eq(ibf_addr_resolve(NULL, NULL, 0, AF_UNSPEC, &ss), -FI_EINVAL);
	cr_assert_eq(ibf_addr_resolve("300.1.2.3", "1", 0, AF_INET, &ss), -FI_ENODATA);
	cr_assert_eq(ibf_addr_resolve("198.18.0.1", "1", 0, AF_INET6, &ss), -FI_ENODATA);
}

Test(addr, same_host_ignores_port)
{
	struct sockaddr_storage a, b, c;

	ibf_addr_resolve("198.18.0.1", "1", 0, AF_INET, &a);
	ibf_addr_resolve("198.18.0.1", "2", 0, AF_INET, &b);
	ibf_addr_resolve("198.18.0.2", "1", 0, AF_INET, &c);
	cr_assert(ibf_addr_same_host(sa(&a), sa(&b)));
	cr_assert_not(ibf_addr_same_host(sa(&a), sa(&c)));
}

Test(addr, set_port)
{
	struct sockaddr_storage ss;

	ibf_addr_resolve("fd00::1", "1", 0, AF_INET6, &ss);
	ibf_addr_set_port(sa(&ss), 65535);
	cr_assert_eq(ibf_addr_port(sa(&ss)), 65535);
}

Test(addr, link_local)
{
	struct sockaddr_storage ss;

	ibf_addr_resolve("fe80::1", "1", 0, AF_INET6, &ss);
	cr_assert(ibf_addr_is_link_local(sa(&ss)));
	ibf_addr_resolve("169.254.3.4", "1", 0, AF_INET, &ss);
	cr_assert(ibf_addr_is_link_local(sa(&ss)));
	ibf_addr_resolve("198.18.0.1", "1", 0, AF_INET, &ss);
	cr_assert_not(ibf_addr_is_link_local(sa(&ss)));
}

Test(addr, str_like_fi_av_straddr)
{
	struct sockaddr_storage ss;
	char buf[80];

	ibf_addr_resolve("198.18.0.1", "7471", 0, AF_INET, &ss);
	cr_assert_str_eq(ibf_addr_str(sa(&ss), buf, sizeof(buf)),
			 "fi_sockaddr_in://198.18.0.1:7471");
	ibf_addr_resolve("fd00::2", "5", 0, AF_INET6, &ss);
	cr_assert_str_eq(ibf_addr_str(sa(&ss), buf, sizeof(buf)),
			 "fi_sockaddr_in6://[fd00::2]:5");
	cr_assert_str_eq(ibf_addr_str(NULL, buf, sizeof(buf)), "fi_addr_format_unspec://");
}

Test(addr, len_of_unknown_family_is_zero)
{
	struct sockaddr s = { .sa_family = AF_UNIX };

	cr_assert_eq(ibf_addr_len(&s), 0);
	cr_assert_eq(ibf_addr_len(NULL), 0);
	cr_assert_eq(ibf_addr_format(&s), FI_FORMAT_UNSPEC);
}

/* Connection private data is framed with its length (ibf_msg_cm.c). */
Test(cm_data, pack_then_unpack_is_exact)
{
	uint8_t wire[IBF_CM_WIRE_SIZE + 140];
	const void *data;
	size_t len;
	uint8_t n;

	memset(wire, 0xee, sizeof(wire));	/* the padding rdma_cm adds */
	n = ibf_cm_pack(wire, "hello", 5);
	cr_assert_eq(n, 6);
	ibf_cm_unpack(wire, sizeof(wire), &data, &len);
	cr_assert_eq(len, 5);
	cr_assert(!memcmp(data, "hello", 5));
}

Test(cm_data, empty_and_short_frames)
{
	uint8_t wire[IBF_CM_WIRE_SIZE];
	const void *data;
	size_t len;

	cr_assert_eq(ibf_cm_pack(wire, NULL, 0), 1);
	ibf_cm_unpack(wire, 1, &data, &len);
	cr_assert_eq(len, 0);
	ibf_cm_unpack(NULL, 0, &data, &len);
	cr_assert_eq(len, 0);
	cr_assert_null(data);
	wire[0] = 200;	/* a length beyond what arrived is cut to it */
	ibf_cm_unpack(wire, 10, &data, &len);
	cr_assert_eq(len, 9);
}
