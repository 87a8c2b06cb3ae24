/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What RDM endpoints say to each other: the bytes on the wire.
 *
 * Every message on a connection's QP is [struct ibf_rdm_hdr][payload]:
 *   EAGER  payload is the message (at most FI_IBFAB_EAGER_SIZE bytes)
 *   RTS    a larger message: where to read it (struct ibf_rdm_rts)
 *   FIN    the receiver has read it (struct ibf_rdm_fin)
 *   PING   nothing: is the peer still there? (its completion says)
 *   WDATA  struct ibf_rdm_rma_note: the RDMA WRITE WITH IMMEDIATE just
 *          before it on this QP (immediate: a sequence number) is done,
 *          with remote CQ data in data (flag DATA) or for FI_RMA_EVENT
 *          alone; tag: sequence << 32 | the write's key.  The target
 *          takes it only right after that write (same QP, same
 *          sequence, the length in last), so no CQ data or event comes
 *          without one.  A write larger than the port's max_msg_sz goes
 *          in parts, in order on the QP; only the last carries the
 *          immediate
 *   RDONE  struct ibf_rdm_rma_note: an RDMA READ just before it on this
 *          QP was served (FI_RMA_EVENT); tag: the read's key.  A read
 *          leaves no trace at the target, so this one is taken on the
 *          peer's word, within the rights and range of the key it names
 *   ATOMIC  an atomic on the receiver's memory (struct ibf_atomic_req, then
 *          count operands, then count compare values)
 *   ATOMIC_RESP  its answer (the same struct, status set, then the old
 *          values if it fetched)
 *   KEYQ   struct ibf_rdm_keyq: which region has this requested key (an
 *          initiator's first RMA with it to this peer, in this life)
 *   KEYR   struct ibf_rdm_keyr: its answer, from the bounce KEYQ came in
 * The connection layer (ibf_rdm_conn.h) sends PINGs, credit grants and the
 * private data of rdma_cm requests; the protocol layer (ibf_rdm_proto.h)
 * everything else.
 *
 * Flow control.  EAGER, RTS, ATOMIC, KEYQ and WDATA are requests: each may hold
 * one of the receiver's eager buffers until the application takes it, so
 * a peer sends one only with a credit.  A connection starts with the
 * window the receiver put in its private data; the receiver grants
 * credits back with a SEND WITH IMMEDIATE of no bytes (immediate: how
 * many), as each request is done with, or while the peer holds less than
 * its share of the receiver's buffers (ibf_rdm_flow.c).  A request
 * beyond the credits given ends the connection.
 *
 * Nothing a peer writes here is trusted: the receiver knows the sender by
 * the QP a message came in on, and checks every length, count and cookie
 * against what it has before acting on it.  Little-endian hosts assumed,
 * as everywhere in rdma-core's users of private data.
 */
#ifndef IBF_RDM_WIRE_H
#define IBF_RDM_WIRE_H

#include <stdint.h>

#include "ibf.h"
#include "ibf_av.h"	/* struct ibf_name */

enum {
	IBF_RDM_EAGER = 1, IBF_RDM_RTS, IBF_RDM_FIN, IBF_RDM_PING, IBF_RDM_WDATA,
	IBF_RDM_ATOMIC, IBF_RDM_ATOMIC_RESP, IBF_RDM_RDONE, IBF_RDM_KEYQ,
	IBF_RDM_KEYR
};
#define IBF_RDM_F_TAGGED 1
#define IBF_RDM_F_DATA 2
/* Flag 4 (a window the FIN closes by SEND WITH INVALIDATE) is no more:
 * the sender unbinds its windows itself, and a receiver ignores it. */
struct ibf_rdm_hdr {
	uint64_t tag;
	uint64_t data;
	uint32_t rsvd;		/* 0; ignored (it carried the receiver's index
				 * of the connection, never read: a receiver
				 * knows the sender by the QP it came in on) */
	uint8_t type;
	uint8_t flags;
	/* The sender's domain's key generation (requested keys): when it
	 * changes, a region whose device key the receiver learned has
	 * closed, so the receiver forgets what it learned from the sender. */
	uint16_t key_gen;
};
#define IBF_RDM_HDR sizeof(struct ibf_rdm_hdr)

/*
 * The header's own fields, written by whoever builds the message (the
 * protocol, or the connection layer for its PING) when it builds it: its
 * type and flags, and the sender's key generation (ibf_rdm_key_gen).  A
 * post adds nothing to it but a write's sequence (a WDATA's tag).
 */
static inline void ibf_rdm_hdr_set(struct ibf_rdm_hdr *hdr, uint8_t type,
				   uint8_t flags, uint16_t key_gen)
{
	hdr->type = type;
	hdr->flags = flags;
	hdr->rsvd = 0;
	hdr->key_gen = key_gen;
}

#define IBF_RDM_IOV IBF_RDM_IOV_LIMIT
struct ibf_rdm_seg {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t rsvd;
};
struct ibf_rdm_rts {
	uint64_t len;		/* the whole message */
	uint32_t cookie;	/* the sender's op, echoed in the FIN */
	uint32_t nseg;
	struct ibf_rdm_seg seg[IBF_RDM_IOV];
};
/* Behind a WDATA or RDONE header: where the RMA went. */
struct ibf_rdm_rma_note {
	uint64_t addr;
	uint64_t len;
	/* The bytes of the write that carried the immediate: the RMA's
	 * last part (an RMA above the port's max_msg_sz goes in parts). */
	uint64_t last;
};
struct ibf_rdm_fin {
	uint32_t cookie;
	int32_t status;		/* 0, or -FI_E* the reader met */
};
/* A requested key's region, asked for (KEYQ) and told (KEYR). */
struct ibf_rdm_keyq {
	uint64_t key;
	uint32_t cookie;	/* the asker's op, echoed */
	uint32_t rsvd;
};
struct ibf_rdm_keyr {
	uint64_t key;
	uint64_t base;		/* where its offset 0 is */
	uint64_t len;
	uint32_t cookie;
	uint32_t rkey;
	uint32_t access;	/* IBV_ACCESS_REMOTE_READ | _WRITE it grants */
	int32_t status;		/* 0, or -FI_ENOKEY */
};

/* Private data of a connect request and its accept. */
struct ibf_rdm_cm_data {
	uint32_t magic;
	uint32_t conn;		/* the sender's index of this connection */
	struct ibf_name name;	/* the connecting endpoint's address */
	uint32_t window;	/* requests the sender takes before a grant */
	uint32_t flags;		/* IBF_RDM_CM_F_* */
};
#define IBF_RDM_CM_MAGIC 0x1bfad301u
/* The sender counts RMA that lands in it (FI_RMA_EVENT): each RMA sent it
 * has a notice behind it, whatever the initiator's own caps. */
#define IBF_RDM_CM_F_RMA_EVENT 1u
#define IBF_RDM_CM_TIEBREAK 0x1bfad3ffu	/* reject: use my connection */
/* Reject: I have a live connection with the name you claim; try again
 * later (if that one was dead, it will have ended by then). */
#define IBF_RDM_CM_BUSY 0x1bfad3feu
/* Reject, final: your request is not a valid one (not ibfab's, or a name
 * not on your host).  Any other reject is tried again. */
#define IBF_RDM_CM_REFUSED 0x1bfad3fdu

#endif /* IBF_RDM_WIRE_H */
