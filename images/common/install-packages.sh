#!/bin/sh
# The package step of every image that carries Slurm (the node images and the jail): `sh
# install-packages.sh PKG...`. Daemon users get the same ids everywhere first, because nodes use the
# jail's /etc/passwd, so the ids there must own the node's files. Daemons never start at install time,
# and no apt cache, package-generated host key or munge key stays in the layer.
set -eu
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
groupadd -r -g 990 munge && useradd -r -u 990 -g munge -d /nonexistent -s /usr/sbin/nologin munge
groupadd -r -g 64030 slurm && useradd -r -u 64030 -g slurm -d /nonexistent -s /usr/sbin/nologin slurm
useradd -r -u 991 -g 65534 -d /run/sshd -s /usr/sbin/nologin sshd
rm -f /etc/apt/sources.list  # debootstrap's; debian.sources replaces it
apt-get update
apt-get install -y --no-install-recommends "$@"
apt-get clean
rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_* /etc/munge/munge.key "$0"
