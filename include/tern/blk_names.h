/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern block names: export, host and port names follow the rule of the
 * messenger's identities (a host id is one), for the client's options,
 * the target's configfs and the target's check of an OPEN alike, so that
 * what one side accepts the other does too.
 */
#ifndef _TERN_BLK_NAMES_H
#define _TERN_BLK_NAMES_H

#include <tern/tern.h>
#include <uapi/tern/tern_blk_proto.h>

static_assert(TERN_BLK_NAME_LEN == TERN_WIRE_IDENTITY_LEN);

/* TERN_NAME_RULE, in TERN_BLK_NAME_LEN bytes with the NUL */
static inline bool tern_blk_name_ok(const char *s)
{
	return tern_identity_valid(s, TERN_BLK_NAME_LEN);
}

#endif /* _TERN_BLK_NAMES_H */
