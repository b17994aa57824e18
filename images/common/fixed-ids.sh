#!/bin/sh
# The same uid/gid for the daemons' users in every image and in the jail: nodes use the jail's
# /etc/passwd, so the ids there must be the ones the node's files are owned by.
set -e
groupadd -r -g 990 munge && useradd -r -u 990 -g munge -d /nonexistent -s /usr/sbin/nologin munge
groupadd -r -g 64030 slurm && useradd -r -u 64030 -g slurm -d /nonexistent -s /usr/sbin/nologin slurm
useradd -r -u 991 -g 65534 -d /run/sshd -s /usr/sbin/nologin sshd
