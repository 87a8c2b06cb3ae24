/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Socket addresses: how ibfab names endpoints (FI_SOCKADDR_IN/IN6). */
#include "config.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "ibf.h"

size_t ibf_addr_len(const struct sockaddr *sa)
{
	switch (sa ? sa->sa_family : AF_UNSPEC) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

uint32_t ibf_addr_format(const struct sockaddr *sa)
{
	switch (sa ? sa->sa_family : AF_UNSPEC) {
	case AF_INET:
		return FI_SOCKADDR_IN;
	case AF_INET6:
		return FI_SOCKADDR_IN6;
	default:
		return FI_FORMAT_UNSPEC;
	}
}

/*
 * node/service to one address.  passive: a local address to bind, where a
 * NULL node means "any".  family: AF_UNSPEC, AF_INET or AF_INET6.
 */
int ibf_addr_resolve(const char *node, const char *service, int passive,
		     int family, struct sockaddr_storage *out)
{
	struct addrinfo hints = { 0 }, *res;
	int ret;

	if (!node && !service)
		return -FI_EINVAL;
	hints.ai_family = family;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	ret = getaddrinfo(node, service, &hints, &res);
	if (ret) {
		IBF_INFO(FI_LOG_CORE, "cannot resolve %s:%s: %s\n",
			 node ? node : "*", service ? service : "*",
			 gai_strerror(ret));
		return -FI_ENODATA;
	}
	if (res->ai_addrlen > sizeof(*out)) {
		freeaddrinfo(res);
		return -FI_EINVAL;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int ibf_addr_same_host(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return 0;
}

uint16_t ibf_addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

void ibf_addr_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

int ibf_addr_is_link_local(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	if (sa->sa_family == AF_INET)	/* 169.254.0.0/16 */
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 16) == 0xa9fe;
	return 0;
}

int ibf_addr_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

/* "fi_sockaddr_in://198.18.0.1:7471", as libfabric's fi_av_straddr writes. */
const char *ibf_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (!sa || !ibf_addr_len(sa)) {
		snprintf(buf, len, "fi_addr_format_unspec://");
		return buf;
	}
	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
			  host, sizeof(host));
		snprintf(buf, len, "fi_sockaddr_in://%s:%u", host, ibf_addr_port(sa));
	} else {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
			  host, sizeof(host));
		snprintf(buf, len, "fi_sockaddr_in6://[%s]:%u", host,
			 ibf_addr_port(sa));
	}
	return buf;
}
