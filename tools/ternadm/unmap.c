// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm unmap: unmap a tern device through /dev/tern-blk-ctl.
 *
 *   ternadm unmap DEVICE [--force]
 *
 * Unless forced (remove=NAME,force=1), tern_blk refuses a device that is
 * open, mounted or held by another block device with -EBUSY: the kernel
 * decides, in one step with marking the device as going, so nothing can
 * open it between a check and the unmap. Here we ask again for a second,
 * for openers that are about to let go (udev probing a new disk), and then
 * only explain a refusal: where the device is mounted, what holds it,
 * which process has it open.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "ternadm.h"

#define MAX_PARTS	16	/* the disk and its partitions */
/* A new disk's first opener (udev's probe) may still hold it: 1 s more */
#define BUSY_RETRIES	10
#define BUSY_RETRY_MS	100

void unmap_usage(FILE *out)
{
	fprintf(out, "usage: %s unmap DEVICE [--force]\n\n", ternadm_prog);
	fprintf(out, "DEVICE is ternN or /dev/ternN. A device that is mounted, held by\n");
	fprintf(out, "another block device or open is refused unless --force is given.\n");
}

/* The disk and its partitions. */
struct unmap_dev {
	char	name[32];
	dev_t	devs[MAX_PARTS];
	char	parts[MAX_PARTS][40];	/* sysfs directories */
	int	nr;
};

/* "ternN" or "/dev/ternN" to "ternN"; -1 when it is neither. */
static int unmap_name(const char *arg, char *name, size_t len)
{
	const char *p;

	if (!strncmp(arg, "/dev/", 5))
		arg += 5;
	if (strncmp(arg, "tern", 4) || !arg[4])
		return -1;
	for (p = arg + 4; *p; p++)
		if (!isdigit((unsigned char)*p))
			return -1;
	if (strlen(arg) >= len)
		return -1;
	snprintf(name, len, "%s", arg);
	return 0;
}

static int read_devt(const char *dir, dev_t *out)
{
	char path[PATH_MAX], buf[32];
	unsigned int maj, min;

	snprintf(path, sizeof(path), "%s/dev", dir);
	if (read_attr(path, buf, sizeof(buf)) ||
	    sscanf(buf, "%u:%u", &maj, &min) != 2)
		return -1;
	*out = makedev(maj, min);
	return 0;
}

/* Fill @d from /sys/block/NAME; -1 when there is no such disk. */
static int unmap_lookup(struct unmap_dev *d)
{
	char dir[64];
	struct dirent *de;
	DIR *dh;

	snprintf(dir, sizeof(dir), SYS_BLOCK "/%s", d->name);
	if (read_devt(dir, &d->devs[0]))
		return -1;
	snprintf(d->parts[0], sizeof(d->parts[0]), "%s", d->name);
	d->nr = 1;
	dh = opendir(dir);
	if (!dh)
		return 0;
	while ((de = readdir(dh)) && d->nr < MAX_PARTS) {
		char part[PATH_MAX];

		if (strncmp(de->d_name, d->name, strlen(d->name)) ||
		    strlen(de->d_name) >= sizeof(d->parts[0]))
			continue;
		snprintf(part, sizeof(part), "%s/%s", dir, de->d_name);
		if (read_devt(part, &d->devs[d->nr]))
			continue;
		snprintf(d->parts[d->nr], sizeof(d->parts[0]), "%s",
			 de->d_name);
		d->nr++;
	}
	closedir(dh);
	return 0;
}

static bool is_ours(const struct unmap_dev *d, dev_t dev)
{
	int i;

	for (i = 0; i < d->nr; i++)
		if (d->devs[i] == dev)
			return true;
	return false;
}

/* A mount whose source is the disk or a partition; prints it. */
static bool unmap_mounted(const struct unmap_dev *d)
{
	char src[PATH_MAX], mnt[PATH_MAX];
	bool found = false;
	struct stat st;
	FILE *f;

	f = fopen("/proc/mounts", "re");
	if (!f)
		return false;
	while (fscanf(f, "%4095s %4095s %*[^\n]", src, mnt) == 2) {
		if (src[0] != '/' || stat(src, &st) || !S_ISBLK(st.st_mode) ||
		    !is_ours(d, st.st_rdev))
			continue;
		ternadm_err("unmap: %s is mounted on %s", src, mnt);
		found = true;
	}
	fclose(f);
	return found;
}

/* Another block device (dm, md, ...) stacked on the disk or a partition. */
static bool unmap_held(const struct unmap_dev *d)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool found = false;
	DIR *dh;
	int i;

	for (i = 0; i < d->nr; i++) {
		if (i)
			snprintf(path, sizeof(path), SYS_BLOCK "/%s/%s/holders",
				 d->name, d->parts[i]);
		else
			snprintf(path, sizeof(path), SYS_BLOCK "/%s/holders",
				 d->name);
		dh = opendir(path);
		if (!dh)
			continue;
		while ((de = readdir(dh))) {
			if (de->d_name[0] == '.')
				continue;
			ternadm_err("unmap: %s is held by %s", d->parts[i],
				    de->d_name);
			found = true;
		}
		closedir(dh);
	}
	return found;
}

/* An exclusive claim (mount, swap, stacked device, O_EXCL opener). */
static bool unmap_claimed(const struct unmap_dev *d)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/dev/%s", d->name);
	fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		close(fd);
		return false;
	}
	if (errno != EBUSY)
		return false;
	ternadm_err("unmap: %s is in exclusive use", path);
	return true;
}

/* A process holding the disk or a partition open; prints the first. */
static bool unmap_open(const struct unmap_dev *d)
{
	char path[PATH_MAX], comm[64];
	struct dirent *pe, *fe;
	pid_t self = getpid();
	bool found = false;
	struct stat st;
	DIR *proc, *fds;

	proc = opendir("/proc");
	if (!proc)
		return false;
	while (!found && (pe = readdir(proc))) {
		if (!isdigit((unsigned char)pe->d_name[0]) ||
		    atoi(pe->d_name) == self)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", pe->d_name);
		fds = opendir(path);
		if (!fds)
			continue;
		while ((fe = readdir(fds))) {
			if (fe->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/%s/fd/%s",
				 pe->d_name, fe->d_name);
			if (stat(path, &st) || !S_ISBLK(st.st_mode) ||
			    !is_ours(d, st.st_rdev))
				continue;
			snprintf(path, sizeof(path), "/proc/%s/comm",
				 pe->d_name);
			if (read_attr(path, comm, sizeof(comm)))
				snprintf(comm, sizeof(comm), "?");
			ternadm_err("unmap: %s is open in process %s (%s)",
				    d->name, pe->d_name, comm);
			found = true;
			break;
		}
		closedir(fds);
	}
	closedir(proc);
	return found;
}

/* Why tern_blk refused: every mount and holder, else an opener. */
static void unmap_explain(const struct unmap_dev *d)
{
	bool found = unmap_mounted(d);

	found |= unmap_held(d);
	if (!found && !unmap_claimed(d))
		unmap_open(d);
}

/* Write "remove=NAME[,force=1]"; check the answer; 0 or -errno. */
static int unmap_remove(const char *name, bool force)
{
	char cmd[64], answer[64], want[64];
	ssize_t n;
	int fd, err = 0;

	fd = open(BLK_CTL_DEVICE, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(cmd, sizeof(cmd), "remove=%s%s", name,
		 force ? ",force=1" : "");
	if (write(fd, cmd, strlen(cmd)) < 0) {
		err = -errno;
		goto out;
	}
	/* name=NAME; a kernel from before it answers nothing: fine too */
	n = read(fd, answer, sizeof(answer) - 1);
	if (n > 0) {
		answer[n] = '\0';
		answer[strcspn(answer, "\n")] = '\0';
		snprintf(want, sizeof(want), "name=%s", name);
		if (!strncmp(answer, "name=", 5) && strcmp(answer, want)) {
			ternadm_err("unmap: the kernel answered '%s', not '%s'",
				    answer, want);
			err = -EIO;
		}
	}
out:
	close(fd);
	return err;
}

int unmap_main(int argc, char **argv)
{
	struct unmap_dev d;
	const char *dev = NULL;
	bool force = false;
	int i, err;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			unmap_usage(stdout);
			return EXIT_OK;
		}
		if (!strcmp(argv[i], "--force")) {
			force = true;
			continue;
		}
		if (argv[i][0] == '-') {
			ternadm_err("unmap: unknown option '%s'", argv[i]);
			return EXIT_USAGE;
		}
		if (dev) {
			ternadm_err("unmap: exactly one DEVICE expected");
			return EXIT_USAGE;
		}
		dev = argv[i];
	}
	memset(&d, 0, sizeof(d));
	if (!dev) {
		ternadm_err("unmap: missing DEVICE");
		return EXIT_USAGE;
	}
	if (unmap_name(dev, d.name, sizeof(d.name))) {
		ternadm_err("unmap: bad DEVICE '%s': expected ternN or /dev/ternN",
			    dev);
		return EXIT_USAGE;
	}
	if (unmap_lookup(&d)) {
		ternadm_err("unmap: no device %s", d.name);
		return EXIT_FAILED;
	}
	err = unmap_remove(d.name, force);
	for (i = 0; err == -EBUSY && i < BUSY_RETRIES; i++) {
		usleep(BUSY_RETRY_MS * 1000);
		err = unmap_remove(d.name, force);
	}
	if (err == -EBUSY) {
		unmap_explain(&d);
		ternadm_err("unmap: %s is in use; not unmapped (--force unmaps anyway)",
			    d.name);
		return EXIT_FAILED;
	}
	if (err) {
		ternadm_err("unmap %s: %s%s", d.name, strerror(-err),
			    err == -ENOENT ? " (is tern_blk loaded?)" : "");
		return EXIT_FAILED;
	}
	return EXIT_OK;
}
