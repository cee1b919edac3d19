/*
 * Fake xpu_smi: prints an nvidia-smi-like table of the /dev/xpuN nodes it
 * can see and exits 0. Built static so it runs in any container image.
 * Built with -DXPU_SMI_XRE5 it is the xpu-smi of XRE 5 instead: dynamic,
 * linked against libxpuml.so.1 and libxpunvidia-ml.so.1 like the real one,
 * so the loader refuses to start it where those libraries are missing.
 * XPU_FAKEHOST_ROOT prefixes /dev and /proc when set (for tests outside a
 * container).
 *
 * With -m, -q or -i N -q it prints the telemetry of the public layout
 * (kunlun-host.md, "Telemetry a host offers") from the state file
 * /etc/xpu-fakehost/xpu-smi.state of the fake host (fakehost.WriteXPUSMIState):
 *   mode normal|hang|flood|fail|oddline|noq
 *   dev <bus-id> <temp C> <power W> <used MiB> <total MiB> <util %> <name> <name2>
 * one dev line per device, in xpu-smi index order. The fake host's root is
 * XPU_FAKEHOST_ROOT, else what /proc/self/exe says once the program's own
 * path below the root is cut off, else / (in a chroot into the fake host,
 * whose /proc is text files).
 *
 * Like the real one it opens /dev/xpuctrl and every /dev/xpuN char node it
 * sees before it reports anything, and fails as xpu-smi does without its
 * driver (exit 3) when the open is refused with EPERM: what the device
 * cgroup of a container answers for a node it was not given. Any other
 * error (ENXIO: no driver behind the fake major) counts as reached.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifdef XPU_SMI_XRE5
/* Exported by every library of a fake host (csrc/template.c). */
int xpu_fake_library_marker(void);
#define XPU_SMI_TITLE "XPU-SMI 5 (xpu-cdi fake host) "
#else
#define XPU_SMI_TITLE "XPU-SMI (xpu-cdi fake host)  "
#endif

struct node {
	int index;
	char name[64];
	char type[8];
	unsigned int major, minor;
};

static int node_index(const char *name)
{
	const char *p;

	if (strncmp(name, "xpu", 3) != 0 || name[3] == '\0')
		return -1;
	for (p = name + 3; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	return atoi(name + 3);
}

static int cmp(const void *a, const void *b)
{
	return ((const struct node *)a)->index - ((const struct node *)b)->index;
}

#define STATE_PATH "/etc/xpu-fakehost/xpu-smi.state"
#define MAX_DEVS 256

struct telemetry {
	char bus[64], name[64], name2[64], serial[64];
	double temp, power;
	long used, total, util;
};

/*
 * fake_root finds the root of the fake host this program lives in: the
 * program is <root>/usr/local/xpu-<version>/bin/<name>.
 */
static void fake_root(char *out, size_t n)
{
	const char *env = getenv("XPU_FAKEHOST_ROOT");
	char exe[4096], *p, *last = NULL;
	ssize_t len;

	out[0] = '\0';
	if (env) {
		snprintf(out, n, "%s", env);
		return;
	}
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		return;
	exe[len] = '\0';
	for (p = strstr(exe, "/usr/local/xpu"); p; p = strstr(p + 1, "/usr/local/xpu"))
		last = p;
	if (last) {
		*last = '\0';
		snprintf(out, n, "%s", exe);
	}
}

static int read_state(const char *root, char *mode, size_t mode_len, struct telemetry *t, int max)
{
	char path[4096], line[1024];
	int n = 0;
	FILE *f;

	snprintf(mode, mode_len, "normal");
	snprintf(path, sizeof(path), "%s" STATE_PATH, root);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char word[64];
		if (sscanf(line, "mode %63s", word) == 1) {
			snprintf(mode, mode_len, "%s", word);
			continue;
		}
		/* An optional 9th word is the serial number -q prints. */
		t[n].serial[0] = '\0';
		if (n < max && sscanf(line, "dev %63s %lf %lf %ld %ld %ld %63s %63s %63s", t[n].bus, &t[n].temp, &t[n].power,
				      &t[n].used, &t[n].total, &t[n].util, t[n].name, t[n].name2, t[n].serial) >= 8)
			n++;
	}
	fclose(f);
	return n;
}

/* telemetry prints -m or -q output; it returns the exit code. */
static int telemetry(int argc, char **argv, const char *version)
{
	struct telemetry t[MAX_DEVS];
	char root[4096], mode[64];
	int n, i, only = -1, m = 0, q = 0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-m") == 0)
			m = 1;
		else if (strcmp(argv[i], "-q") == 0)
			q = 1;
		else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc)
			only = atoi(argv[++i]);
		else {
			fprintf(stderr, "xpu-smi: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	fake_root(root, sizeof(root));
	n = read_state(root, mode, sizeof(mode), t, MAX_DEVS);
	if (n < 0) {
		fprintf(stderr, "xpu-smi: no state file %s" STATE_PATH "\n", root);
		return 1;
	}
	if (strcmp(mode, "hang") == 0)
		for (;;)
			pause();
	if (strcmp(mode, "flood") == 0)
		for (;;)
			printf("xpu 0 0 0 0 C 0 0 0 W 0 0 0 0 0 0 0 0 0 0 %% (P800 OAM) 0 0 0 0 0 0 0 0 0\n");
	if (strcmp(mode, "fail") == 0) {
		fprintf(stderr, "xpu-smi: Failed to initialize XPUML: driver not loaded\n");
		return 3;
	}
	if (q && strcmp(mode, "noq") == 0) {
		fprintf(stderr, "xpu-smi: -q: Failed to query device\n");
		return 5;
	}
	if (only >= n) {
		fprintf(stderr, "xpu-smi: no device %d\n", only);
		return 4;
	}
	for (i = 0; i < n; i++) {
		if (only >= 0 && i != only)
			continue;
		if (m && !q) {
			/* 32 fields: 1 index, 4 temp, 8 power, 17 used, 18 total, 19 util, 21-22 name. */
			/* Mode oddline gives the first line a 33rd field. */
			printf("xpu %d 0 0 %.0f C 0 0 %.1f W %s0 0 0 0 0 0 0 %ld %ld %ld %% (%s %s) 0 0 0 0 0 0 0 0 0\n",
			       i, t[i].temp, t[i].power, i == 0 && strcmp(mode, "oddline") == 0 ? "extra " : "",
			       t[i].used, t[i].total, t[i].util, t[i].name, t[i].name2);
			continue;
		}
		if (i == only || (only < 0 && i == 0)) {
			printf("==============XPU-SMI LOG==============\n");
			printf("Driver Version                      : %s\n", version);
			printf("Attached XPUs                       : %d\n", n);
		}
		printf("XPU %s\n", t[i].bus);
		printf("    Product Name                    : %s %s\n", t[i].name, t[i].name2);
		printf("    Bus Id                          : %s\n", t[i].bus);
		if (t[i].serial[0])
			printf("    Serial Number                   : %s\n", t[i].serial);
		printf("    Memory Usage\n");
		printf("        Total                       : %ld MiB\n", t[i].total);
		printf("        Used                        : %ld MiB\n", t[i].used);
		printf("        Free                        : %ld MiB\n", t[i].total - t[i].used);
		printf("    Utilization\n");
		printf("        Xpu                         : %ld %%\n", t[i].util);
		printf("    Temperature\n");
		printf("        XPU Current Temp            : %.0f C\n", t[i].temp);
		printf("    Power Readings\n");
		printf("        Power Draw                  : %.2f W\n", t[i].power);
		printf("    Processes                       : None\n");
	}
	return 0;
}

/*
 * reach opens a device node as the driver's library does. Only EPERM (the
 * device cgroup's refusal) is an error; a node that is not there is left
 * to the listing.
 */
static int reach(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno != EPERM)
		return 0;
	fprintf(stderr, "xpu-smi: Failed to initialize XPUML: open %s: Operation not permitted\n", path);
	return -1;
}

int main(int argc, char **argv)
{
	const char *root = getenv("XPU_FAKEHOST_ROOT");
	char path[4096], version[64] = "N/A";
	struct node nodes[1024];
	struct dirent *de;
	struct stat st;
	int n = 0, i;
	FILE *f;
	DIR *d;

	if (!root)
		root = "";
#ifdef XPU_SMI_XRE5
	if (xpu_fake_library_marker() != 0x1d22) {
		fprintf(stderr, "xpu-smi: libxpuml.so.1 is not a Kunlun library\n");
		return 1;
	}
#endif
	snprintf(path, sizeof(path), "%s/proc/xpu/version", root);
	f = fopen(path, "r");
	if (f) {
		if (fgets(version, sizeof(version), f))
			version[strcspn(version, "\n")] = '\0';
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/dev", root);
	d = opendir(path);
	if (d) {
		while ((de = readdir(d)) != NULL && n < 1024) {
			int idx = node_index(de->d_name);
			if (idx < 0)
				continue;
			snprintf(path, sizeof(path), "%s/dev/%s", root, de->d_name);
			if (stat(path, &st) != 0)
				continue;
			nodes[n].index = idx;
			snprintf(nodes[n].name, sizeof(nodes[n].name), "/dev/%s", de->d_name);
			strcpy(nodes[n].type, S_ISCHR(st.st_mode) ? "char" : "file");
			nodes[n].major = major(st.st_rdev);
			nodes[n].minor = minor(st.st_rdev);
			n++;
		}
		closedir(d);
	}
	qsort(nodes, n, sizeof(nodes[0]), cmp);
	snprintf(path, sizeof(path), "%s/dev/xpuctrl", root);
	if (reach(path) != 0)
		return 3;
	for (i = 0; i < n; i++) {
		if (strcmp(nodes[i].type, "char") != 0)
			continue;
		snprintf(path, sizeof(path), "%s%s", root, nodes[i].name);
		if (reach(path) != 0)
			return 3;
	}
	if (argc > 1)
		return telemetry(argc, argv, version);

	printf("+------------------------------------------------------+\n");
	printf("| " XPU_SMI_TITLE "Driver Version: %-8s|\n", version);
	printf("|-------+--------------------+---------------+---------|\n");
	printf("| XPU   | Name               | Major:Minor   | Type    |\n");
	printf("|=======+====================+===============+=========|\n");
	for (i = 0; i < n; i++) {
		char mm[32];
		snprintf(mm, sizeof(mm), "%u:%u", nodes[i].major, nodes[i].minor);
		printf("| %-5d | %-18s | %-13s | %-7s |\n", nodes[i].index, nodes[i].name, mm, nodes[i].type);
	}
	printf("+-------+--------------------+---------------+---------+\n");
	printf("%d device(s) found\n", n);
	return 0;
}
