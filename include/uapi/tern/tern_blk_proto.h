/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * tern block protocol: the fronts that tern_blk (requester) and
 * tern_target (responder) exchange over tern messenger transactions.
 *
 * Every request front starts with struct tern_blk_req. OPEN appends
 * struct tern_blk_open_args; the other opcodes send the bare header.
 * OPEN, INFO and WATCH are answered with a struct tern_blk_info reply
 * front; WATCH is held by the responder until the export's capacity
 * differs from the one the request names in @offset, or for at most the
 * responder's hold time, so the requester learns of a resize without
 * asking;
 * I/O replies carry no front, only the reply status (0 or a negative
 * errno). READ data comes back with the reply (the responder pushes it
 * into the requester's buffer); WRITE data is pulled by the responder.
 *
 * All fields are little-endian, every structure has a fixed size, and
 * reserved fields must be zero (a responder refuses non-zero reserved
 * fields with -EINVAL). Documentation/protocol.rst, section "Block
 * protocol", is the normative description.
 */
#ifndef _UAPI_TERN_BLK_PROTO_H
#define _UAPI_TERN_BLK_PROTO_H

#include <linux/types.h>

#define TERN_BLK_PROTO_VERSION	1

/* Lengths of the NUL-padded names in OPEN, terminator included. */
#define TERN_BLK_NAME_LEN	64

enum tern_blk_opcode {
	TERN_BLK_OP_READ		= 1,	/* data FROM_RESPONDER */
	TERN_BLK_OP_WRITE		= 2,	/* data TO_RESPONDER */
	TERN_BLK_OP_FLUSH		= 3,	/* no data, offset/length 0 */
	TERN_BLK_OP_DISCARD		= 4,	/* no data, range */
	TERN_BLK_OP_WRITE_ZEROES	= 5,	/* no data, range */
	TERN_BLK_OP_OPEN		= 6,	/* bind the export; reply info */
	TERN_BLK_OP_INFO		= 7,	/* reply info (resize) */
	TERN_BLK_OP_CLOSE		= 8,	/* release the binding */
	TERN_BLK_OP_WATCH		= 9,	/* reply info on a resize */
	TERN_BLK_OP_MAX			= TERN_BLK_OP_WATCH,
};

/* tern_blk_req.flags */
#define TERN_BLK_F_FUA		(1U << 0)	/* WRITE: forced unit access */
#define TERN_BLK_F_NOUNMAP	(1U << 1)	/* WRITE_ZEROES: keep allocated */
/*
 * OPEN: the requester takes the export's uuid in tern_blk_info.uuid. A
 * target answers with a zero uuid to a requester that does not ask: one
 * that predates the field refuses a reply with it set. A target that
 * predates it refuses the flag (-EINVAL); the requester then opens again
 * without it, and the export has no uuid.
 */
#define TERN_BLK_F_UUID		(1U << 2)
#define TERN_BLK_F_ALL		(TERN_BLK_F_FUA | TERN_BLK_F_NOUNMAP | \
				 TERN_BLK_F_UUID)

/**
 * struct tern_blk_req - request front, 32 bytes
 * @opcode: enum tern_blk_opcode
 * @version: TERN_BLK_PROTO_VERSION
 * @flags: TERN_BLK_F_*
 * @reserved0: zero
 * @length: bytes; READ/WRITE: equals the message's data buffer length
 * @offset: first 512-byte sector; WATCH: the capacity the requester knows
 * @handle: binding handle returned by OPEN (0 in OPEN itself)
 * @reserved1: zero
 */
struct tern_blk_req {
	__u8	opcode;
	__u8	version;
	__le16	flags;
	__le32	length;
	__le64	offset;
	__le64	handle;
	__le64	reserved1;
};

/**
 * struct tern_blk_open_args - follows struct tern_blk_req in OPEN, 128 bytes
 * @export: export name, NUL-terminated and NUL-padded
 * @host: requester's host id, NUL-terminated and NUL-padded
 */
struct tern_blk_open_args {
	char	export[TERN_BLK_NAME_LEN];
	char	host[TERN_BLK_NAME_LEN];
};

/* tern_blk_info.flags */
#define TERN_BLK_INFO_READ_ONLY		(1U << 0)
#define TERN_BLK_INFO_WRITE_CACHE	(1U << 1)	/* FLUSH is meaningful */
#define TERN_BLK_INFO_FUA		(1U << 2)
#define TERN_BLK_INFO_DISCARD		(1U << 3)
#define TERN_BLK_INFO_WRITE_ZEROES	(1U << 4)
#define TERN_BLK_INFO_ALL		0x1f

/* Bytes of the export's uuid (RFC 9562, in its canonical byte order). */
#define TERN_BLK_UUID_LEN		16

/**
 * struct tern_blk_info - reply front of OPEN, INFO and WATCH, 64 bytes
 * @handle: binding handle to put in every later request of this export
 * @capacity: export size in 512-byte sectors
 * @logical_block_size: bytes, power of two, 512..4096
 * @physical_block_size: bytes, power of two, >= logical_block_size
 * @max_transfer: largest READ/WRITE length in bytes
 * @max_segments: largest number of data segments the responder accepts
 * @flags: TERN_BLK_INFO_*
 * @max_discard_sectors: largest DISCARD in sectors (0: unsupported)
 * @max_write_zeroes_sectors: largest WRITE_ZEROES in sectors (0: unsupported)
 * @discard_granularity: bytes
 * @uuid: the export's persistent uuid; all zero when the target has none
 *	or the OPEN did not ask for it (TERN_BLK_F_UUID)
 * @reserved: zero
 */
struct tern_blk_info {
	__le64	handle;
	__le64	capacity;
	__le32	logical_block_size;
	__le32	physical_block_size;
	__le32	max_transfer;
	__le16	max_segments;
	__le16	flags;
	__le32	max_discard_sectors;
	__le32	max_write_zeroes_sectors;
	__le32	discard_granularity;
	__u8	uuid[TERN_BLK_UUID_LEN];
	__le32	reserved;
};

#ifdef __KERNEL__
#include <linux/build_bug.h>
static_assert(sizeof(struct tern_blk_req) == 32);
static_assert(sizeof(struct tern_blk_open_args) == 128);
static_assert(sizeof(struct tern_blk_info) == 64);
#endif

#endif /* _UAPI_TERN_BLK_PROTO_H */
