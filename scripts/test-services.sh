#!/usr/bin/env bash
# test-services.sh: make sure the services delayq's tests need answer.
#
#   Redis            at $DELAYQ_TEST_REDIS_ADDR   (default 127.0.0.1:6379)
#   MariaDB / MySQL  at $DELAYQ_TEST_MYSQL_ADDR   (default 127.0.0.1:3306),
#                    user $DELAYQ_TEST_MYSQL_USER (default root),
#                    password $DELAYQ_TEST_MYSQL_PASSWORD (default empty),
#                    database $DELAYQ_TEST_MYSQL_DB (default test)
#
# For each service: if it answers, fine; else if its server is installed and
# the address is local, start it; else, as root with apt-get, install it
# (Debian/Ubuntu) and start it. Then wait (at most
# $DELAYQ_TEST_SERVICES_WAIT seconds, default 60) until both answer, create
# the test database if it is missing, and make sure the MySQL user can log in
# over TCP (a fresh MariaDB lets root in only through the unix socket).
# The redis-server and redis-cli binaries must exist too: tests start their
# own servers (crash tests, clusters). So must promtool (Debian's prometheus
# package: the alert rules' tests), Chromium at /usr/bin/chromium (the
# dashboard's browser test), and galera-4 with rsync (the Galera tests
# start a 3-node cluster); they are installed without starting the
# Prometheus server the package ships.
#
# Every failure exits non-zero with a message naming the service and why.
# Servers this script starts keep running; it prints how to stop them.
set -euo pipefail

REDIS_ADDR="${DELAYQ_TEST_REDIS_ADDR:-127.0.0.1:6379}"
MYSQL_ADDR="${DELAYQ_TEST_MYSQL_ADDR:-127.0.0.1:3306}"
MYSQL_USER="${DELAYQ_TEST_MYSQL_USER:-root}"
MYSQL_PASSWORD="${DELAYQ_TEST_MYSQL_PASSWORD:-}"
MYSQL_DB="${DELAYQ_TEST_MYSQL_DB:-test}"
WAIT_SECONDS="${DELAYQ_TEST_SERVICES_WAIT:-60}"
STATE_DIR="${DELAYQ_TEST_STATE_DIR:-${TMPDIR:-/tmp}/delayq-test-services}"

log() { echo "test-services: $*" >&2; }
die() {
	echo "test-services: ERROR: $*" >&2
	exit 1
}

# split_addr ADDR DEFAULT_PORT: sets HOST and PORT ("[::1]:6379" works too).
split_addr() {
	local addr=$1 def=$2
	if [[ $addr == \[*\]:* ]]; then
		HOST=${addr%%]:*}
		HOST=${HOST#[}
		PORT=${addr##*]:}
	elif [[ $addr == *:* ]]; then
		HOST=${addr%:*}
		PORT=${addr##*:}
	else
		HOST=$addr
		PORT=$def
	fi
	[[ $PORT =~ ^[0-9]+$ ]] && ((10#$PORT >= 1 && 10#$PORT <= 65535)) ||
		die "bad address '$addr': port '$PORT' is not a number from 1 to 65535"
}

split_addr "$REDIS_ADDR" 6379
REDIS_HOST=$HOST REDIS_PORT=$PORT
split_addr "$MYSQL_ADDR" 3306
MYSQL_HOST=$HOST MYSQL_PORT=$PORT
# The address a server started here binds (Redis wants an IP, not a name).
bind_ip() { if [[ $1 == localhost ]]; then echo 127.0.0.1; else echo "$1"; fi; }
[[ $MYSQL_DB =~ ^[A-Za-z0-9_]+$ ]] || die "MariaDB: database name '$MYSQL_DB' (DELAYQ_TEST_MYSQL_DB) must match [A-Za-z0-9_]+"

is_local() { [[ $1 == 127.* || $1 == localhost || $1 == ::1 ]]; }
have() { command -v "$1" >/dev/null 2>&1; }
is_root() { [[ $(id -u) -eq 0 ]]; }

# with_timeout SECONDS CMD...: run CMD, killed after SECONDS when coreutils'
# timeout is there.
with_timeout() {
	local s=$1
	shift
	if have timeout; then timeout "$s" "$@"; else "$@"; fi
}

# tcp_open HOST PORT: true when something accepts TCP connections there.
tcp_open() {
	with_timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

# wait_until SECONDS CMD...: poll CMD every 0.5 s until it succeeds or the
# time is up.
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep 0.5
	done
}

# ---- apt -------------------------------------------------------------------

APT_UPDATED=no
# apt_locked CMD...: run an apt-get command, waiting while another apt or
# dpkg (unattended-upgrades on a fresh machine, a second test run) holds
# its lock: up to 10 minutes, then it fails as apt-get did.
apt_locked() {
	local tries=0 err rc
	err=$(mktemp)
	while true; do
		rc=0
		"$@" -o DPkg::Lock::Timeout=60 2>"$err" || rc=$?
		cat "$err" >&2
		if ((rc == 0)); then
			rm -f "$err"
			return 0
		fi
		# apt waits for dpkg's lock itself (Lock::Timeout), not always
		# for the package lists' lock: that one is retried here.
		if ! grep -q 'Could not get lock' "$err" || ((++tries >= 60)); then
			rm -f "$err"
			return 1
		fi
		log "apt: another package manager holds the lock; waiting (try $tries of 60)"
		sleep 10
	done
}

# apt_install SERVICE PACKAGE...: install packages, or die naming SERVICE.
apt_install() {
	local service=$1
	shift
	if ! is_root || ! have apt-get; then
		die "$service: not installed and apt-get is not available (not root?); install $* yourself, or point the DELAYQ_TEST_* variables at a running server"
	fi
	export DEBIAN_FRONTEND=noninteractive
	if [[ $APT_UPDATED == no ]]; then
		log "apt-get update"
		apt_locked apt-get update -qq || die "$service: apt-get update failed"
		APT_UPDATED=yes
	fi
	log "$service: apt-get install $*"
	apt_locked apt-get install -y -qq --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" >&2 ||
		die "$service: apt-get install $* failed"
}

# ---- Redis -----------------------------------------------------------------

redis_ping() {
	if have redis-cli; then
		[[ $(with_timeout 3 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
	else
		# Speak RESP by hand: send PING, expect +PONG.
		with_timeout 3 bash -c '
			exec 3<>"/dev/tcp/$1/$2" || exit 1
			printf "PING\r\n" >&3
			IFS= read -r -t 2 line <&3 || exit 1
			[[ $line == +PONG* ]]' _ "$REDIS_HOST" "$REDIS_PORT" 2>/dev/null
	fi
}

REDIS_INSTALLED_NOW=no
ensure_redis_binaries() {
	local missing=()
	have redis-server || missing+=(redis-server)
	have redis-cli || missing+=(redis-tools)
	if ((${#missing[@]})); then
		apt_install Redis "${missing[@]}"
		REDIS_INSTALLED_NOW=yes
		have redis-server || die "Redis: redis-server is still missing after installing ${missing[*]}"
		have redis-cli || die "Redis: redis-cli is still missing after installing ${missing[*]}"
	fi
}

start_redis() {
	local dir="$STATE_DIR/redis-$REDIS_PORT"
	local pidfile="$dir/redis.pid" logfile="$dir/redis.log"
	mkdir -p "$dir"
	rm -f "$pidfile"
	log "Redis: starting redis-server on $REDIS_HOST:$REDIS_PORT (dir $dir)"
	: >"$logfile"
	redis-server --daemonize yes --bind "$(bind_ip "$REDIS_HOST")" --port "$REDIS_PORT" \
		--save "" --appendonly no --dir "$dir" --pidfile "$pidfile" --logfile "$logfile" ||
		die "Redis: redis-server failed to start (its error is printed above; log: $logfile)"
	# The daemon forks before it binds: watch its log for a fatal error
	# instead of waiting the whole time for a server that already gave up.
	local deadline=$((SECONDS + WAIT_SECONDS))
	until redis_ping; do
		if grep -qE "Could not create server TCP listening socket|Failed listening|FATAL|Fatal error" "$logfile" 2>/dev/null; then
			# Lost the port to a Redis that started meanwhile: that will do.
			if wait_until 2 redis_ping; then
				log "Redis: another redis-server took $REDIS_HOST:$REDIS_PORT meanwhile and answers; using it"
				return
			fi
			die "Redis: redis-server on $REDIS_HOST:$REDIS_PORT failed to start; last lines of $logfile:
$(tail -n 20 "$logfile")"
		fi
		if ((SECONDS >= deadline)); then
			die "Redis: started redis-server on $REDIS_HOST:$REDIS_PORT but it did not answer PING within ${WAIT_SECONDS}s; last lines of $logfile:
$(tail -n 20 "$logfile" 2>/dev/null)"
		fi
		sleep 0.2
	done
	log "Redis: started (pid $(cat "$pidfile" 2>/dev/null || echo '?'); stop it with: kill \$(cat $pidfile))"
}

ensure_redis() {
	if redis_ping; then
		log "Redis: answers at $REDIS_HOST:$REDIS_PORT"
		ensure_redis_binaries
		return
	fi
	if ! is_local "$REDIS_HOST"; then
		die "Redis: nothing answers at $REDIS_HOST:$REDIS_PORT, and it is not a local address, so it cannot be started here"
	fi
	ensure_redis_binaries
	# Installing the package may have started the distribution's server:
	# give it a moment rather than race it for the port.
	local grace=0
	[[ $REDIS_INSTALLED_NOW == yes ]] && grace=10
	if wait_until "$grace" redis_ping; then
		log "Redis: answers at $REDIS_HOST:$REDIS_PORT"
		return
	fi
	if tcp_open "$REDIS_HOST" "$REDIS_PORT"; then
		die "Redis: something listens on $REDIS_HOST:$REDIS_PORT but does not answer PING with PONG (not Redis? a password?)"
	fi
	start_redis
}

# ---- MariaDB / MySQL -------------------------------------------------------

mysql_client() {
	if have mariadb; then echo mariadb; elif have mysql; then echo mysql; fi
}
mysql_admin() {
	if have mariadb-admin; then echo mariadb-admin; elif have mysqladmin; then echo mysqladmin; fi
}
mysql_server_bin() {
	local b
	for b in /usr/sbin/mariadbd /usr/sbin/mysqld /usr/libexec/mysqld; do
		if [[ -x $b ]]; then
			echo "$b"
			return
		fi
	done
}

# mysql_ping: true when the server answers at MYSQL_HOST:MYSQL_PORT. The
# admin tool's ping succeeds even when the login is refused: a refusal is an
# answer.
mysql_ping() {
	local admin
	admin=$(mysql_admin)
	if [[ -n $admin ]]; then
		MYSQL_PWD="$MYSQL_PASSWORD" with_timeout 5 "$admin" --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" \
			-u "$MYSQL_USER" --connect-timeout=3 ping >/dev/null 2>&1
	else
		tcp_open "$MYSQL_HOST" "$MYSQL_PORT"
	fi
}

# mysql_tcp SQL: run SQL as the test user over TCP.
mysql_tcp() {
	MYSQL_PWD="$MYSQL_PASSWORD" with_timeout 15 "$(mysql_client)" --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" \
		-u "$MYSQL_USER" --connect-timeout=5 --batch --skip-column-names -e "$1"
}

# mysql_socket SQL: run SQL as the OS user (root) through the unix socket,
# which a fresh MariaDB authenticates with unix_socket.
mysql_socket() {
	with_timeout 15 "$(mysql_client)" --protocol=SOCKET -u root --connect-timeout=5 --batch --skip-column-names -e "$1"
}

mysql_datadir() {
	local d=""
	if have my_print_defaults; then
		d=$(my_print_defaults --mysqld 2>/dev/null | sed -n 's/^--datadir=//p' | tail -n 1)
	fi
	echo "${d:-/var/lib/mysql}"
}

start_mysql() {
	local bin datadir logfile
	bin=$(mysql_server_bin)
	[[ -n $bin ]] || die "MariaDB: no server binary (mariadbd/mysqld) found after installing"

	# A server process already running (just started by the package, or
	# listening elsewhere): give it the wait, do not start a second one on
	# the same data directory.
	if have start-stop-daemon && start-stop-daemon --status --exec "$bin"; then
		log "MariaDB: $bin is already running; waiting for it to answer at $MYSQL_HOST:$MYSQL_PORT"
		wait_until "$WAIT_SECONDS" mysql_ping && return
		die "MariaDB: a $bin process is running but nothing answers at $MYSQL_HOST:$MYSQL_PORT within ${WAIT_SECONDS}s (is it listening on another port? check DELAYQ_TEST_MYSQL_ADDR)"
	fi

	if [[ -d /run/systemd/system ]] && have systemctl && [[ $MYSQL_PORT == 3306 ]]; then
		log "MariaDB: systemctl start mariadb"
		if systemctl start mariadb 2>/dev/null || systemctl start mysql 2>/dev/null; then
			wait_until "$WAIT_SECONDS" mysql_ping && return
		fi
		log "MariaDB: systemd did not bring it up; starting $bin directly"
	fi

	is_root || die "MariaDB: not running and starting it needs root (the server runs as the mysql user)"
	id mysql >/dev/null 2>&1 || die "MariaDB: there is no 'mysql' OS user to run the server as"

	datadir=$(mysql_datadir)
	if [[ ! -d $datadir/mysql ]]; then
		log "MariaDB: initialising the data directory $datadir"
		install -d -o mysql -g mysql "$datadir"
		if have mariadb-install-db; then
			mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db >&2 ||
				die "MariaDB: mariadb-install-db --datadir=$datadir failed"
		elif have mysql_install_db; then
			mysql_install_db --user=mysql --datadir="$datadir" >&2 ||
				die "MariaDB: mysql_install_db --datadir=$datadir failed"
		else
			"$bin" --initialize-insecure --user=mysql --datadir="$datadir" >&2 ||
				die "MariaDB: $bin --initialize-insecure --datadir=$datadir failed"
		fi
	fi

	install -d -o mysql -g mysql /run/mysqld
	mkdir -p "$STATE_DIR"
	logfile="$STATE_DIR/mariadb.log"
	touch "$logfile"
	chown mysql:mysql "$logfile" 2>/dev/null || true

	local args=(--user=mysql --datadir="$datadir" --port="$MYSQL_PORT" --bind-address="$(bind_ip "$MYSQL_HOST")" --log-error="$logfile")
	if have start-stop-daemon; then
		log "MariaDB: starting $bin on $MYSQL_HOST:$MYSQL_PORT (log $logfile)"
		start-stop-daemon --start --oknodo --background --exec "$bin" -- "${args[@]}" ||
			die "MariaDB: start-stop-daemon --start --exec $bin failed; see $logfile"
	elif have mysqld_safe; then
		log "MariaDB: starting mysqld_safe on $MYSQL_HOST:$MYSQL_PORT (log $logfile)"
		nohup mysqld_safe "${args[@]}" >/dev/null 2>&1 &
	else
		die "MariaDB: neither start-stop-daemon nor mysqld_safe is available to start $bin"
	fi
	if ! wait_until "$WAIT_SECONDS" mysql_ping; then
		die "MariaDB: started $bin but it did not answer at $MYSQL_HOST:$MYSQL_PORT within ${WAIT_SECONDS}s; last lines of $logfile:
$(tail -n 20 "$logfile" 2>/dev/null)"
	fi
	log "MariaDB: started"
}

ensure_mysql_client() {
	if [[ -z $(mysql_client) ]]; then
		apt_install MariaDB mariadb-client
		[[ -n $(mysql_client) ]] || die "MariaDB: no mariadb/mysql client after installing mariadb-client"
	fi
}

ensure_mysql() {
	if mysql_ping; then
		log "MariaDB: answers at $MYSQL_HOST:$MYSQL_PORT"
	else
		is_local "$MYSQL_HOST" ||
			die "MariaDB: nothing answers at $MYSQL_HOST:$MYSQL_PORT, and it is not a local address, so it cannot be started here"
		if [[ -z $(mysql_server_bin) ]]; then
			apt_install MariaDB mariadb-server mariadb-client
		fi
		ensure_mysql_client
		# Installing the package may have started the server.
		if wait_until 5 mysql_ping; then
			log "MariaDB: answers at $MYSQL_HOST:$MYSQL_PORT"
		else
			start_mysql
		fi
	fi
	ensure_mysql_client
	ensure_mysql_login
	mysql_tcp "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\`" ||
		die "MariaDB: CREATE DATABASE IF NOT EXISTS $MYSQL_DB as $MYSQL_USER failed (does the user have the CREATE privilege?)"
	log "MariaDB: user $MYSQL_USER logs in over TCP; database $MYSQL_DB exists"
}

# ensure_mysql_login: the test user must log in over TCP. A fresh MariaDB
# authenticates root@localhost only through unix_socket; when that is the
# case (root, empty password, local server), also allow the empty password.
ensure_mysql_login() {
	local err
	if err=$(mysql_tcp "SELECT 1" 2>&1 >/dev/null); then
		return
	fi
	if [[ $MYSQL_USER != root || -n $MYSQL_PASSWORD ]] || ! is_local "$MYSQL_HOST"; then
		die "MariaDB: user $MYSQL_USER cannot log in over TCP at $MYSQL_HOST:$MYSQL_PORT: $err"
	fi
	is_root || die "MariaDB: root cannot log in over TCP with an empty password ($err), and fixing that through the unix socket needs the OS root user"
	log "MariaDB: root cannot log in over TCP ($err); allowing the empty password through the unix socket"
	# MariaDB: keep socket login and add the empty password. Then MySQL's
	# syntax. The 127.0.0.1 account matters when the server skips name
	# resolution (the TCP client is then 127.0.0.1, not localhost).
	mysql_socket "ALTER USER root@localhost IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('')" 2>/dev/null ||
		mysql_socket "ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('')" 2>/dev/null ||
		mysql_socket "ALTER USER root@localhost IDENTIFIED WITH caching_sha2_password BY ''" 2>/dev/null ||
		mysql_socket "ALTER USER root@localhost IDENTIFIED BY ''" ||
		die "MariaDB: could not change root@localhost's authentication through the unix socket"
	if ! mysql_tcp "SELECT 1" >/dev/null 2>&1; then
		mysql_socket "CREATE USER IF NOT EXISTS root@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL PRIVILEGES ON *.* TO root@'127.0.0.1' WITH GRANT OPTION; CREATE USER IF NOT EXISTS root@'::1' IDENTIFIED BY ''; GRANT ALL PRIVILEGES ON *.* TO root@'::1' WITH GRANT OPTION; FLUSH PRIVILEGES" ||
			die "MariaDB: could not create root@127.0.0.1 through the unix socket"
	fi
	err=$(mysql_tcp "SELECT 1" 2>&1 >/dev/null) ||
		die "MariaDB: root still cannot log in over TCP at $MYSQL_HOST:$MYSQL_PORT: $err"
}

# ---- tools the tests drive --------------------------------------------------

CHROMIUM=/usr/bin/chromium

# apt_install_quiet SERVICE PACKAGE...: apt_install, with services kept from
# starting (a policy-rc.d that says no, for the time of the install).
apt_install_quiet() {
	local policy=/usr/sbin/policy-rc.d
	if is_root && [[ ! -e $policy ]]; then
		printf '#!/bin/sh\n# test-services.sh: no service starts during its install\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		trap 'rm -f '"$policy" EXIT
	fi
	apt_install "$@"
}

# galera_lib: print the galera-4 provider's path, or fail when it is not
# installed (the places internal/testenv/galera.go looks).
galera_lib() {
	local p
	for p in /usr/lib/galera/libgalera_smm.so /usr/lib/galera-4/libgalera_smm.so \
		/usr/lib64/galera-4/libgalera_smm.so /usr/lib/libgalera_smm.so; do
		[[ -e $p ]] && echo "$p" && return 0
	done
	return 1
}

ensure_tools() {
	local missing=()
	have promtool || missing+=(prometheus)
	[[ -x $CHROMIUM ]] || missing+=(chromium)
	galera_lib >/dev/null || missing+=(galera-4)
	have rsync || missing+=(rsync)
	if ((${#missing[@]})); then
		apt_install_quiet "test tools (promtool, Chromium, Galera, rsync)" "${missing[@]}"
		have promtool || die "promtool: still missing after installing prometheus (the alert rules' tests need it)"
		[[ -x $CHROMIUM ]] || die "Chromium: $CHROMIUM still missing after installing chromium (the dashboard's browser test needs it)"
		galera_lib >/dev/null || die "Galera: libgalera_smm.so still missing after installing galera-4 (the Galera tests start a 3-node cluster)"
		have rsync || die "rsync: still missing after installing it (a Galera node joins by an rsync state transfer)"
	fi
	log "tools: $(command -v promtool), $CHROMIUM, $(galera_lib), $(command -v rsync)"
}

ensure_redis
ensure_mysql
ensure_tools
log "ready: Redis $REDIS_HOST:$REDIS_PORT, MariaDB $MYSQL_USER@$MYSQL_HOST:$MYSQL_PORT/$MYSQL_DB"
