/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM connections by QP number (struct ibf_qp_map, ibf_rdm_conn.h): an
 * arrival or a completion names its QP, never its connection, and a peer
 * is known by the QP its bytes came in on.  An open-addressing table of
 * qp_num << 32 | (conn index + 1), read without a lock by progress and
 * changed under cm_lock; a table that grows is replaced, and the old one
 * freed by progress when no lookup can still be in it.
 */
#include "config.h"

#include <assert.h>
#include <stdlib.h>

#include "ibf_rdm_conn.h"

static uint32_t ibf_qp_hash(uint32_t qp_num)
{
	return (qp_num * 0x9e3779b1u) >> 7;
}

struct ibf_rdm_conn *ibf_rdm_qp_conn(struct ibf_rdm_ep_conns *ep,
				     uint32_t qp_num)
{
	struct ibf_qp_map *m = __atomic_load_n(&ep->qp_map, __ATOMIC_ACQUIRE);
	uint32_t i, n;
	uint64_t e;

	if (unlikely(!m))
		return NULL;
	for (i = ibf_qp_hash(qp_num), n = 0; n <= m->mask; i++, n++) {
		e = __atomic_load_n(&m->slot[i & m->mask], __ATOMIC_ACQUIRE);
		if (!e)
			return NULL;
		if ((uint32_t)(e >> 32) == qp_num)
			return ibf_rdm_conn_at(ep, (uint32_t)e - 1);
	}
	return NULL;
}

uint32_t ibf_rdm_arrival_epoch(struct ibf_rdm_conn *conn, uint32_t qp_num)
{
	uint32_t epoch = __atomic_load_n(&conn->epoch, __ATOMIC_ACQUIRE);

	/* On an earlier QP of the connection: of a life that has ended. */
	if (unlikely(qp_num != __atomic_load_n(&conn->qp_num, __ATOMIC_ACQUIRE)))
		epoch--;
	return epoch;
}

/*
 * Put e in m (room is certain): over the entry of its QP number, or in the
 * first free slot (tombstone or empty) of its probe.
 */
static void ibf_qp_map_put(struct ibf_qp_map *m, uint64_t e)
{
	uint32_t qp = (uint32_t)(e >> 32), i = ibf_qp_hash(qp), n;
	uint64_t cur, *free_slot = NULL;

	for (n = 0; n <= m->mask; i++, n++) {
		cur = m->slot[i & m->mask];
		if (cur && cur != IBF_QP_MAP_TOMB && (uint32_t)(cur >> 32) == qp) {
			__atomic_store_n(&m->slot[i & m->mask], e, __ATOMIC_RELEASE);
			return;
		}
		if (!free_slot && (!cur || cur == IBF_QP_MAP_TOMB))
			free_slot = &m->slot[i & m->mask];
		if (!cur)
			break;
	}
	/* A table at most half full always has an empty slot on the probe. */
	assert(free_slot);
	if (!*free_slot)
		m->used++;
	m->live++;
	__atomic_store_n(free_slot, e, __ATOMIC_RELEASE);
}

/*
 * cm_lock held: conn's new QP, before it can carry anything.  A table that
 * would be more than half full (live and tombstones) is replaced by one
 * with room for twice what lives.
 */
int ibf_rdm_qp_map_set(struct ibf_rdm_ep_conns *ep, uint32_t qp_num,
		       struct ibf_rdm_conn *conn)
{
	struct ibf_qp_map *m = ep->qp_map, *n;
	uint32_t i, cap;

	if (!m || 2 * (m->used + 1) > m->mask + 1) {
		for (cap = 64; m && cap < 4 * (m->live + 1); cap *= 2)
			;
		n = calloc(1, sizeof(*n));
		if (n)
			n->slot = calloc(cap, sizeof(*n->slot));
		if (!n || !n->slot) {
			free(n);
			IBF_WARN(FI_LOG_EP_CTRL, "no memory for a QP of a "
				 "connection: refused\n");
			return -FI_ENOMEM;
		}
		n->mask = cap - 1;
		for (i = 0; m && i <= m->mask; i++)
			if (m->slot[i] && m->slot[i] != IBF_QP_MAP_TOMB)
				ibf_qp_map_put(n, m->slot[i]);
		n->retired = m;
		__atomic_store_n(&ep->qp_map, n, __ATOMIC_RELEASE);
		/* The next progress frees the old one (ibf_rdm_cm_deliver),
		 * when no lookup can still be in it. */
		if (m)
			__atomic_store_n(&ep->cm_pending, 1, __ATOMIC_SEQ_CST);
		m = n;
	}
	ibf_qp_map_put(m, (uint64_t)qp_num << 32 | (conn->index + 1));
	return 0;
}

void ibf_rdm_qp_map_del(struct ibf_rdm_ep_conns *ep, uint32_t qp_num)
{
	struct ibf_qp_map *m = ep->qp_map;
	uint32_t i, n;
	uint64_t cur;

	for (i = ibf_qp_hash(qp_num), n = 0; m && n <= m->mask; i++, n++) {
		cur = m->slot[i & m->mask];
		if (!cur)
			return;
		if (cur != IBF_QP_MAP_TOMB && (uint32_t)(cur >> 32) == qp_num) {
			__atomic_store_n(&m->slot[i & m->mask], IBF_QP_MAP_TOMB,
					 __ATOMIC_RELEASE);
			m->live--;
			return;
		}
	}
}

void ibf_rdm_qp_maps_free(struct ibf_qp_map *m)
{
	struct ibf_qp_map *next;

	for (; m; m = next) {
		next = m->retired;
		free(m->slot);
		free(m);
	}
}

/*
 * cm_lock held, by progress before it looks anything up: the tables
 * replaced before this call began are no one's any more (progress calls
 * never overlap); they are taken off, for the caller to free.
 */
struct ibf_qp_map *ibf_rdm_qp_maps_retired(struct ibf_rdm_ep_conns *ep)
{
	struct ibf_qp_map *m = ep->qp_map, *old;

	if (!m)
		return NULL;
	old = m->retired;
	m->retired = NULL;
	return old;
}

void ibf_rdm_qp_map_free(struct ibf_rdm_ep_conns *ep)
{
	ibf_rdm_qp_maps_free(ep->qp_map);
	ep->qp_map = NULL;
}
