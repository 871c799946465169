/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * tern wire format.
 *
 * Every frame on a lane starts with a fixed 48-byte little-endian header,
 * followed by front_len bytes of front and data_len bytes of data. All
 * multi-byte fields are little-endian; there are no bitfields.
 * Documentation/protocol.rst is the normative description.
 */
#ifndef _UAPI_TERN_WIRE_H
#define _UAPI_TERN_WIRE_H

#include <linux/types.h>

#define TERN_WIRE_MAGIC		0x4e524554	/* "TERN" read as LE u32 */
#define TERN_WIRE_VERSION	3
#define TERN_DEFAULT_PORT	7447

/* Hard protocol limits; sessions negotiate values at or below these. */
#define TERN_WIRE_MAX_FRONT	8192
#define TERN_WIRE_MAX_DATA	(16U << 20)
#define TERN_WIRE_MAX_LANES	64
#define TERN_WIRE_MAX_QDEPTH	4096

enum tern_wire_type {
	TERN_WIRE_HELLO		= 1,	/* connector -> acceptor, front = hello */
	TERN_WIRE_HELLO_ACK	= 2,	/* acceptor -> connector, front = hello */
	TERN_WIRE_REQUEST	= 3,
	TERN_WIRE_REPLY		= 4,
	TERN_WIRE_PING		= 5,
	TERN_WIRE_PONG		= 6,
	TERN_WIRE_AUTH		= 7,	/* connector -> acceptor, front = auth */
	TERN_WIRE_AUTH_ACK	= 8,	/* acceptor -> connector, front = auth */
	TERN_WIRE_TYPE_MAX	= TERN_WIRE_AUTH_ACK,
};

/* Header flags. */
#define TERN_WIRE_F_DATA_TO_RESPONDER	(1U << 0) /* request: responder pulls */
#define TERN_WIRE_F_DATA_FROM_RESPONDER	(1U << 1) /* request: responder pushes */
#define TERN_WIRE_F_RESENT		(1U << 2) /* request sent before */
#define TERN_WIRE_F_DATA_CRC		(1U << 3) /* data_crc is valid */
#define TERN_WIRE_F_REMOTE		(1U << 4) /* data in requester memory */
#define TERN_WIRE_F_ALL			0x001f

struct tern_wire_hdr {
	__le32	magic;		/* TERN_WIRE_MAGIC */
	__u8	version;	/* TERN_WIRE_VERSION */
	__u8	type;		/* enum tern_wire_type */
	__le16	flags;		/* TERN_WIRE_F_* */
	__le64	tid;		/* transaction id, session scoped, never reused */
	__le32	seq;		/* per-connection frame sequence number */
	__le32	ack;		/* last seq received from the peer on this lane */
	__le32	front_len;	/* front bytes following the header */
	__le32	data_len;	/* data bytes following the front */
	__le32	buf_len;	/* REQUEST: size of the requester's buffer */
	__le32	status;		/* REPLY: responder status, negative errno */
	__le32	data_crc;	/* crc32c of front then data, if F_DATA_CRC */
	__le32	hdr_crc;	/* crc32c of the preceding 44 bytes */
};

/*
 * Integrity (TERN_FEAT_INTEGRITY): once a direction is signed, data_crc
 * and hdr_crc together hold the header's tag, and every frame carries
 * TERN_WIRE_TAG_LEN more bytes between its header and its front: the
 * front's tag, then the data's. Each tag is the first 8 bytes of a
 * Poly1305 MAC under a one-time key that ChaCha20 draws from the
 * direction's key and the frame's number; Documentation/protocol.rst,
 * "Integrity", has what each covers.
 */
#define TERN_WIRE_HDR_TAG_OFF	40	/* offsetof(data_crc) */
#define TERN_WIRE_PART_TAG_LEN	8
#define TERN_WIRE_TAG_LEN	(2 * TERN_WIRE_PART_TAG_LEN)

/* Feature bits carried in tern_wire_hello.features. */
#define TERN_FEAT_DATA_CRC	(1U << 0)
#define TERN_FEAT_REMOTE_DATA	(1U << 1)	/* TERN_WIRE_F_REMOTE allowed */
#define TERN_FEAT_AUTH		(1U << 2)	/* mutual authentication */
#define TERN_FEAT_ENCRYPT	(1U << 3)	/* AEAD after the handshake */
#define TERN_FEAT_INTEGRITY	(1U << 4)	/* MACs after the handshake */
#define TERN_FEAT_ALL		(TERN_FEAT_DATA_CRC | TERN_FEAT_REMOTE_DATA | \
				 TERN_FEAT_AUTH | TERN_FEAT_ENCRYPT | \
				 TERN_FEAT_INTEGRITY)

/*
 * Remote data descriptor (TERN_FEAT_REMOTE_DATA). A REQUEST with
 * TERN_WIRE_F_REMOTE carries 1..TERN_WIRE_MAX_RDESC of these as its data
 * (data_len = 16 * n) instead of the data itself; their lengths add up to
 * buf_len and describe the requester's buffer in order. The responder
 * reads (TO_RESPONDER) or writes (FROM_RESPONDER) it with the transport's
 * remote memory access. A REPLY with TERN_WIRE_F_REMOTE has data_len 0
 * and buf_len = bytes written into the buffer. data_crc, when on, covers
 * the front and then the described data, never the descriptors.
 */
struct tern_wire_rdesc {
	__le64	addr;		/* remote address (RDMA: MR iova) */
	__le32	len;		/* bytes, > 0 */
	__le32	rkey;		/* RDMA: the MR's remote key */
};

#define TERN_WIRE_MAX_RDESC	64

#define TERN_WIRE_NONCE_LEN	32
#define TERN_WIRE_IDENTITY_LEN	64
#define TERN_WIRE_PROOF_LEN	32	/* HMAC-SHA256 */

/*
 * Front of HELLO and HELLO_ACK. The connector proposes, the acceptor
 * answers with the negotiated values (or a non-zero status and closes).
 * With TERN_FEAT_AUTH both carry a fresh nonce and the HELLO the
 * connector's identity; AUTH and AUTH_ACK then carry the proofs.
 */
struct tern_wire_hello {
	__le64	session_id;	/* chosen by the connector at session birth */
	__le64	cookie;		/* secret proving the lane belongs to it */
	__le64	incarnation;	/* random per endpoint: detects peer restart */
	__le32	features;	/* TERN_FEAT_* */
	__le32	max_data;	/* largest data length of one message */
	__le32	max_front;	/* largest front length of one message */
	__le32	keepalive_ms;	/* connector's ping interval */
	__le16	nr_lanes;	/* lanes in the session */
	__le16	lane_idx;	/* index of this lane, < nr_lanes */
	__le16	queue_depth;	/* max requests in flight per session */
	__le16	reserved0;
	__le32	status;		/* HELLO_ACK: 0 or negative errno */
	__le32	reserved1;
	__u8	nonce[TERN_WIRE_NONCE_LEN];	/* TERN_FEAT_AUTH: random */
	/* HELLO with TERN_FEAT_AUTH: the connector's identity, NUL-padded */
	char	identity[TERN_WIRE_IDENTITY_LEN];
};

/*
 * Front of AUTH (the connector's proof) and AUTH_ACK (the acceptor's
 * verdict and, when it is 0, its own proof). Documentation/protocol.rst,
 * "Authentication", has the key schedule.
 */
struct tern_wire_auth {
	__u8	proof[TERN_WIRE_PROOF_LEN];
	__le32	status;		/* AUTH_ACK: 0 or negative errno; AUTH: 0 */
	__le32	reserved;	/* zero */
};

#ifdef __KERNEL__
#include <linux/build_bug.h>
#include <linux/stddef.h>
static_assert(sizeof(struct tern_wire_hdr) == 48);
static_assert(offsetof(struct tern_wire_hdr, data_crc) == TERN_WIRE_HDR_TAG_OFF);
static_assert(sizeof(struct tern_wire_hello) == 152);
static_assert(sizeof(struct tern_wire_auth) == 40);
static_assert(sizeof(struct tern_wire_rdesc) == 16);
#endif

#endif /* _UAPI_TERN_WIRE_H */
