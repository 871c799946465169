/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * tern RDMA transport framing (tern_rdma.ko), below the messenger's
 * frames (tern_wire.h): a lane is one RC queue pair, its frame stream
 * cut into SEND messages, each starting with an 8-byte transport header.
 * Documentation/protocol.rst, section "RDMA framing and credits", is the
 * normative description.
 */
#ifndef _UAPI_TERN_RDMA_WIRE_H
#define _UAPI_TERN_RDMA_WIRE_H

#include <linux/types.h>

#define TERN_RDMA_MSG_MAGIC	0x5254		/* "TR" read as LE u16 */
#define TERN_RDMA_CM_MAGIC	0x4d445254	/* "TRDM" read as LE u32 */
/* 2: a receiver may announce head_size, a sender may pad (pad_from) */
#define TERN_RDMA_VERSION	2
#define TERN_RDMA_VERSION_MIN	1

enum tern_rdma_msg_type {
	TERN_RDMA_MSG_DATA	= 1,	/* header + frame stream bytes */
	TERN_RDMA_MSG_CREDIT	= 2,	/* header only: a credit grant */
};

struct tern_rdma_msg_hdr {
	__le16	magic;		/* TERN_RDMA_MSG_MAGIC */
	__u8	type;		/* enum tern_rdma_msg_type */
	__u8	flags;		/* zero */
	__le16	credits;	/* receive buffers newly posted for the peer */
	/*
	 * Nonzero: the stream stops at this message offset and goes on at
	 * the receiver's head_size, where the data of a request's frame
	 * starts; the bytes between are padding. Only if the receiver
	 * announced a head_size.
	 */
	__le16	pad_from;
};

/* rdma_cm private data of the connect request and of the accept. */
struct tern_rdma_cm_priv {
	__le32	magic;		/* TERN_RDMA_CM_MAGIC */
	__le16	version;	/* TERN_RDMA_VERSION */
	__le16	recv_count;	/* receive buffers posted: initial credits */
	__le32	buf_size;	/* bytes per receive buffer, header included */
	/* version 2: bytes of a receive buffer before its pages; 0: none */
	__le16	head_size;
	__le16	reserved;	/* zero */
};

#ifdef __KERNEL__
#include <linux/build_bug.h>
static_assert(sizeof(struct tern_rdma_msg_hdr) == 8);
static_assert(sizeof(struct tern_rdma_cm_priv) == 16);
#endif

#endif /* _UAPI_TERN_RDMA_WIRE_H */
