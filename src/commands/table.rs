//! The command table: one line per implemented command, pairing Redis's
//! metadata for it (`meta::redis70`) with its handler.

use super::meta::{self as m, CommandMeta};
use super::*;
use super::{
    bitmap as bm, command as cmd, config_cmd as cfg, connection as conn, expire as ex, geo as g,
    hash as h, hyperloglog as hl, info as inf, keys as k, latency as lat, list as l, lolwut as lw,
    memory as mem, migrate as mig, monitor as mon, pubsub as ps, replication as repl,
    scripting as sc, server as srvc, set as se, slowlog as sl, sort as so, stream as xs,
    string as st, transaction as tx, zset as z,
};

pub type Handler = fn(&mut Ctx, &[&[u8]]);

/// A command kvstore implements: Redis's description of it and its handler.
/// A container (CLIENT, CONFIG, …) lists the subcommands it implements,
/// each a `CommandSpec` of its own (`config|get`) that the dispatcher
/// resolves, checks and accounts as Redis does; they share the container's
/// handler, which reads which one it is from `Ctx::cmd`.
pub struct CommandSpec {
    /// Lower-case full name (`get`, `config|get`).
    pub name: &'static str,
    /// Argument count including the name; negative means "at least".
    pub arity: i32,
    pub flags: u32,
    pub handler: Handler,
    pub meta: &'static CommandMeta,
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    /// The command `argv` runs: for a container with a subcommand argument,
    /// that subcommand; `Err` with Redis's error when it has no such one.
    pub fn resolve(&'static self, argv: &[&[u8]]) -> Result<&'static CommandSpec, Vec<u8>> {
        if self.subcommands.is_empty() || argv.len() < 2 {
            return Ok(self);
        }
        let base = self.name.len() + 1;
        if let Some(sub) = self
            .subcommands
            .iter()
            .find(|s| s.name.as_bytes()[base..].eq_ignore_ascii_case(argv[1]))
        {
            return Ok(sub);
        }
        // Redis prints these with C string formats (cut at a NUL byte, the
        // subcommand at 128 bytes), the bytes as they came; the reply
        // keeps newlines out of the line.
        let sub = c_bytes(argv[1]);
        let mut err = b"ERR unknown subcommand '".to_vec();
        err.extend_from_slice(&sub[..sub.len().min(128)]);
        err.extend_from_slice(b"'. Try ");
        err.extend(c_bytes(argv[0]).iter().map(u8::to_ascii_uppercase));
        err.extend_from_slice(b" HELP.");
        Err(err)
    }
}

/// A command's table entry from its metadata: `cmd!(m::GET, st::get)`, or
/// for a container `cmd!(m::CONFIG, cfg::config, [m::CONFIG_GET, …])`.
macro_rules! cmd {
    ($meta:path, $h:expr) => {
        CommandSpec {
            name: $meta.name,
            arity: $meta.arity,
            flags: $meta.flags,
            handler: $h,
            meta: &$meta,
            subcommands: &[],
        }
    };
    ($meta:path, $h:expr, [$($sub:path),+]) => {
        CommandSpec {
            name: $meta.name,
            arity: $meta.arity,
            flags: $meta.flags,
            handler: $h,
            meta: &$meta,
            subcommands: &[$(cmd!($sub, $h)),+],
        }
    };
}

pub static COMMANDS: &[CommandSpec] = &[
    // strings
    cmd!(m::GET, st::get),
    cmd!(m::SET, st::set),
    cmd!(m::SETNX, st::setnx),
    cmd!(m::SETEX, st::setex),
    cmd!(m::PSETEX, st::psetex),
    cmd!(m::GETSET, st::getset),
    cmd!(m::GETDEL, st::getdel),
    cmd!(m::GETEX, st::getex),
    cmd!(m::MGET, st::mget),
    cmd!(m::MSET, st::mset),
    cmd!(m::MSETNX, st::msetnx),
    cmd!(m::APPEND, st::append),
    cmd!(m::STRLEN, st::strlen),
    cmd!(m::GETRANGE, st::getrange),
    cmd!(m::SUBSTR, st::getrange),
    cmd!(m::SETRANGE, st::setrange),
    cmd!(m::INCR, st::incr),
    cmd!(m::DECR, st::decr),
    cmd!(m::INCRBY, st::incrby),
    cmd!(m::DECRBY, st::decrby),
    cmd!(m::INCRBYFLOAT, st::incrbyfloat),
    cmd!(m::LCS, st::lcs),
    // bitmaps
    cmd!(m::SETBIT, bm::setbit),
    cmd!(m::GETBIT, bm::getbit),
    cmd!(m::BITCOUNT, bm::bitcount),
    cmd!(m::BITPOS, bm::bitpos),
    cmd!(m::BITOP, bm::bitop),
    cmd!(m::BITFIELD, bm::bitfield),
    cmd!(m::BITFIELD_RO, bm::bitfield_ro),
    // hashes
    cmd!(m::HSET, h::hset),
    cmd!(m::HMSET, h::hmset),
    cmd!(m::HSETNX, h::hsetnx),
    cmd!(m::HGET, h::hget),
    cmd!(m::HMGET, h::hmget),
    cmd!(m::HGETALL, h::hgetall),
    cmd!(m::HDEL, h::hdel),
    cmd!(m::HLEN, h::hlen),
    cmd!(m::HEXISTS, h::hexists),
    cmd!(m::HSTRLEN, h::hstrlen),
    cmd!(m::HINCRBY, h::hincrby),
    cmd!(m::HINCRBYFLOAT, h::hincrbyfloat),
    cmd!(m::HKEYS, h::hkeys),
    cmd!(m::HVALS, h::hvals),
    cmd!(m::HRANDFIELD, h::hrandfield),
    cmd!(m::HSCAN, h::hscan),
    // lists
    cmd!(m::LPUSH, l::lpush),
    cmd!(m::RPUSH, l::rpush),
    cmd!(m::LPUSHX, l::lpushx),
    cmd!(m::RPUSHX, l::rpushx),
    cmd!(m::LPOP, l::lpop),
    cmd!(m::RPOP, l::rpop),
    cmd!(m::LLEN, l::llen),
    cmd!(m::LRANGE, l::lrange),
    cmd!(m::LINDEX, l::lindex),
    cmd!(m::LSET, l::lset),
    cmd!(m::LINSERT, l::linsert),
    cmd!(m::LREM, l::lrem),
    cmd!(m::LTRIM, l::ltrim),
    cmd!(m::LPOS, l::lpos),
    cmd!(m::LMOVE, l::lmove),
    cmd!(m::RPOPLPUSH, l::rpoplpush),
    cmd!(m::LMPOP, l::lmpop),
    cmd!(m::BLPOP, l::blpop),
    cmd!(m::BRPOP, l::brpop),
    cmd!(m::BLMOVE, l::blmove),
    cmd!(m::BRPOPLPUSH, l::brpoplpush),
    cmd!(m::BLMPOP, l::blmpop),
    // sets
    cmd!(m::SADD, se::sadd),
    cmd!(m::SREM, se::srem),
    cmd!(m::SISMEMBER, se::sismember),
    cmd!(m::SMISMEMBER, se::smismember),
    cmd!(m::SMEMBERS, se::smembers),
    cmd!(m::SCARD, se::scard),
    cmd!(m::SPOP, se::spop),
    cmd!(m::SRANDMEMBER, se::srandmember),
    cmd!(m::SMOVE, se::smove),
    cmd!(m::SINTER, se::sinter),
    cmd!(m::SINTERCARD, se::sintercard),
    cmd!(m::SINTERSTORE, se::sinterstore),
    cmd!(m::SUNION, se::sunion),
    cmd!(m::SUNIONSTORE, se::sunionstore),
    cmd!(m::SDIFF, se::sdiff),
    cmd!(m::SDIFFSTORE, se::sdiffstore),
    cmd!(m::SSCAN, se::sscan),
    // sorted sets
    // hyperloglog
    cmd!(m::PFADD, hl::pfadd),
    cmd!(m::PFCOUNT, hl::pfcount),
    cmd!(m::PFMERGE, hl::pfmerge),
    cmd!(m::PFDEBUG, hl::pfdebug),
    cmd!(m::PFSELFTEST, hl::pfselftest),
    // streams
    cmd!(m::XADD, xs::xadd),
    cmd!(m::XRANGE, xs::xrange),
    cmd!(m::XREVRANGE, xs::xrevrange),
    cmd!(m::XLEN, xs::xlen),
    cmd!(m::XDEL, xs::xdel),
    cmd!(m::XTRIM, xs::xtrim),
    cmd!(m::XREAD, xs::xread),
    cmd!(m::XREADGROUP, xs::xreadgroup),
    cmd!(m::XACK, xs::xack),
    cmd!(m::XPENDING, xs::xpending),
    cmd!(m::XCLAIM, xs::xclaim),
    cmd!(m::XAUTOCLAIM, xs::xautoclaim),
    cmd!(m::XSETID, xs::xsetid),
    cmd!(
        m::XGROUP,
        xs::xgroup,
        [
            m::XGROUP_CREATE,
            m::XGROUP_CREATECONSUMER,
            m::XGROUP_DELCONSUMER,
            m::XGROUP_DESTROY,
            m::XGROUP_HELP,
            m::XGROUP_SETID
        ]
    ),
    cmd!(
        m::XINFO,
        xs::xinfo,
        [
            m::XINFO_CONSUMERS,
            m::XINFO_GROUPS,
            m::XINFO_HELP,
            m::XINFO_STREAM
        ]
    ),
    cmd!(m::GEOADD, g::geoadd),
    cmd!(m::GEODIST, g::geodist),
    cmd!(m::GEOHASH, g::geohash),
    cmd!(m::GEOPOS, g::geopos),
    cmd!(m::GEORADIUS, g::georadius),
    cmd!(m::GEORADIUS_RO, g::georadius_ro),
    cmd!(m::GEORADIUSBYMEMBER, g::georadiusbymember),
    cmd!(m::GEORADIUSBYMEMBER_RO, g::georadiusbymember_ro),
    cmd!(m::GEOSEARCH, g::geosearch),
    cmd!(m::GEOSEARCHSTORE, g::geosearchstore),
    cmd!(m::ZADD, z::zadd),
    cmd!(m::ZINCRBY, z::zincrby),
    cmd!(m::ZSCORE, z::zscore),
    cmd!(m::ZMSCORE, z::zmscore),
    cmd!(m::ZCARD, z::zcard),
    cmd!(m::ZCOUNT, z::zcount),
    cmd!(m::ZLEXCOUNT, z::zlexcount),
    cmd!(m::ZRANGE, z::zrange),
    cmd!(m::ZRANGESTORE, z::zrangestore),
    cmd!(m::ZREVRANGE, z::zrevrange),
    cmd!(m::ZRANGEBYSCORE, z::zrangebyscore),
    cmd!(m::ZREVRANGEBYSCORE, z::zrevrangebyscore),
    cmd!(m::ZRANGEBYLEX, z::zrangebylex),
    cmd!(m::ZREVRANGEBYLEX, z::zrevrangebylex),
    cmd!(m::ZRANK, z::zrank),
    cmd!(m::ZREVRANK, z::zrevrank),
    cmd!(m::ZREM, z::zrem),
    cmd!(m::ZREMRANGEBYRANK, z::zremrangebyrank),
    cmd!(m::ZREMRANGEBYSCORE, z::zremrangebyscore),
    cmd!(m::ZREMRANGEBYLEX, z::zremrangebylex),
    cmd!(m::ZPOPMIN, z::zpopmin),
    cmd!(m::ZPOPMAX, z::zpopmax),
    cmd!(m::ZMPOP, z::zmpop),
    cmd!(m::BZPOPMIN, z::bzpopmin),
    cmd!(m::BZPOPMAX, z::bzpopmax),
    cmd!(m::BZMPOP, z::bzmpop),
    cmd!(m::ZUNION, z::zunion),
    cmd!(m::ZINTER, z::zinter),
    cmd!(m::ZDIFF, z::zdiff),
    cmd!(m::ZUNIONSTORE, z::zunionstore),
    cmd!(m::ZINTERSTORE, z::zinterstore),
    cmd!(m::ZDIFFSTORE, z::zdiffstore),
    cmd!(m::ZINTERCARD, z::zintercard),
    cmd!(m::ZRANDMEMBER, z::zrandmember),
    cmd!(m::ZSCAN, z::zscan),
    cmd!(m::SORT, so::sort),
    cmd!(m::SORT_RO, so::sort_ro),
    // keys
    cmd!(m::DEL, k::del),
    cmd!(m::UNLINK, k::unlink),
    cmd!(m::EXISTS, k::exists),
    cmd!(m::TYPE, k::type_cmd),
    cmd!(m::RENAME, k::rename),
    cmd!(m::DUMP, k::dump),
    cmd!(m::MIGRATE, mig::migrate),
    cmd!(m::RESTORE, k::restore),
    cmd!(m::RESTORE_ASKING, k::restore),
    // access control
    cmd!(
        m::ACL,
        acl::acl,
        [
            m::ACL_CAT,
            m::ACL_DELUSER,
            m::ACL_DRYRUN,
            m::ACL_GENPASS,
            m::ACL_GETUSER,
            m::ACL_HELP,
            m::ACL_LIST,
            m::ACL_LOAD,
            m::ACL_LOG,
            m::ACL_SAVE,
            m::ACL_SETUSER,
            m::ACL_USERS,
            m::ACL_WHOAMI
        ]
    ),
    // cluster (this server is never a cluster node: Redis's answers with
    // cluster support disabled)
    cmd!(
        m::CLUSTER,
        srvc::cluster_disabled,
        [
            m::CLUSTER_ADDSLOTS,
            m::CLUSTER_ADDSLOTSRANGE,
            m::CLUSTER_BUMPEPOCH,
            m::CLUSTER_COUNT_FAILURE_REPORTS,
            m::CLUSTER_COUNTKEYSINSLOT,
            m::CLUSTER_DELSLOTS,
            m::CLUSTER_DELSLOTSRANGE,
            m::CLUSTER_FAILOVER,
            m::CLUSTER_FLUSHSLOTS,
            m::CLUSTER_FORGET,
            m::CLUSTER_GETKEYSINSLOT,
            m::CLUSTER_HELP,
            m::CLUSTER_INFO,
            m::CLUSTER_KEYSLOT,
            m::CLUSTER_LINKS,
            m::CLUSTER_MEET,
            m::CLUSTER_MYID,
            m::CLUSTER_NODES,
            m::CLUSTER_REPLICAS,
            m::CLUSTER_REPLICATE,
            m::CLUSTER_RESET,
            m::CLUSTER_SAVECONFIG,
            m::CLUSTER_SET_CONFIG_EPOCH,
            m::CLUSTER_SETSLOT,
            m::CLUSTER_SHARDS,
            m::CLUSTER_SLAVES,
            m::CLUSTER_SLOTS
        ]
    ),
    cmd!(m::READONLY, srvc::cluster_disabled),
    cmd!(m::READWRITE, srvc::cluster_disabled),
    cmd!(m::ASKING, srvc::cluster_disabled),
    cmd!(m::RENAMENX, k::renamenx),
    cmd!(m::COPY, k::copy),
    cmd!(m::MOVE, k::move_cmd),
    cmd!(m::KEYS, k::keys),
    cmd!(m::SCAN, k::scan),
    cmd!(m::RANDOMKEY, k::randomkey),
    cmd!(m::TOUCH, k::touch),
    cmd!(
        m::OBJECT,
        k::object,
        [
            m::OBJECT_ENCODING,
            m::OBJECT_FREQ,
            m::OBJECT_IDLETIME,
            m::OBJECT_REFCOUNT,
            m::OBJECT_HELP
        ]
    ),
    cmd!(
        m::MEMORY,
        mem::memory_cmd,
        [
            m::MEMORY_DOCTOR,
            m::MEMORY_HELP,
            m::MEMORY_MALLOC_STATS,
            m::MEMORY_PURGE,
            m::MEMORY_STATS,
            m::MEMORY_USAGE
        ]
    ),
    cmd!(m::EXPIRE, ex::expire),
    cmd!(m::PEXPIRE, ex::pexpire),
    cmd!(m::EXPIREAT, ex::expireat),
    cmd!(m::PEXPIREAT, ex::pexpireat),
    cmd!(m::TTL, ex::ttl),
    cmd!(m::PTTL, ex::pttl),
    cmd!(m::EXPIRETIME, ex::expiretime),
    cmd!(m::PEXPIRETIME, ex::pexpiretime),
    cmd!(m::PERSIST, ex::persist),
    // connection
    cmd!(m::PING, conn::ping),
    cmd!(m::ECHO, conn::echo),
    cmd!(m::QUIT, conn::quit),
    cmd!(m::RESET, conn::reset),
    cmd!(m::HELLO, conn::hello),
    cmd!(m::AUTH, conn::auth),
    cmd!(m::SELECT, conn::select),
    cmd!(
        m::CLIENT,
        conn::client,
        [
            m::CLIENT_ID,
            m::CLIENT_INFO,
            m::CLIENT_LIST,
            m::CLIENT_KILL,
            m::CLIENT_GETNAME,
            m::CLIENT_SETNAME,
            m::CLIENT_NO_EVICT,
            m::CLIENT_REPLY,
            m::CLIENT_UNBLOCK,
            m::CLIENT_PAUSE,
            m::CLIENT_UNPAUSE,
            m::CLIENT_TRACKING,
            m::CLIENT_CACHING,
            m::CLIENT_GETREDIR,
            m::CLIENT_TRACKINGINFO,
            m::CLIENT_HELP
        ]
    ),
    // server
    cmd!(m::SWAPDB, srvc::swapdb),
    cmd!(m::DBSIZE, srvc::dbsize),
    cmd!(m::FLUSHDB, srvc::flushdb),
    cmd!(m::FLUSHALL, srvc::flushall),
    cmd!(m::INFO, inf::info),
    cmd!(m::TIME, srvc::time),
    cmd!(m::LOLWUT, lw::lolwut),
    cmd!(
        m::COMMAND,
        cmd::command,
        [
            m::COMMAND_COUNT,
            m::COMMAND_LIST,
            m::COMMAND_INFO,
            m::COMMAND_DOCS,
            m::COMMAND_GETKEYS,
            m::COMMAND_GETKEYSANDFLAGS,
            m::COMMAND_HELP
        ]
    ),
    // scripting
    cmd!(m::EVAL, sc::eval),
    cmd!(m::EVAL_RO, sc::eval_ro),
    cmd!(m::EVALSHA, sc::evalsha),
    cmd!(m::EVALSHA_RO, sc::evalsha_ro),
    cmd!(m::FCALL, sc::fcall),
    cmd!(m::FCALL_RO, sc::fcall_ro),
    cmd!(
        m::FUNCTION,
        sc::function,
        [
            m::FUNCTION_DELETE,
            m::FUNCTION_DUMP,
            m::FUNCTION_FLUSH,
            m::FUNCTION_HELP,
            m::FUNCTION_KILL,
            m::FUNCTION_LIST,
            m::FUNCTION_LOAD,
            m::FUNCTION_RESTORE,
            m::FUNCTION_STATS
        ]
    ),
    cmd!(
        m::SCRIPT,
        sc::script,
        [
            m::SCRIPT_DEBUG,
            m::SCRIPT_EXISTS,
            m::SCRIPT_FLUSH,
            m::SCRIPT_HELP,
            m::SCRIPT_KILL,
            m::SCRIPT_LOAD
        ]
    ),
    cmd!(
        m::CONFIG,
        cfg::config,
        [
            m::CONFIG_GET,
            m::CONFIG_SET,
            m::CONFIG_RESETSTAT,
            m::CONFIG_REWRITE,
            m::CONFIG_HELP
        ]
    ),
    cmd!(m::DEBUG, srvc::debug),
    cmd!(
        m::MODULE,
        srvc::module,
        [
            m::MODULE_LIST,
            m::MODULE_LOAD,
            m::MODULE_LOADEX,
            m::MODULE_UNLOAD,
            m::MODULE_HELP
        ]
    ),
    cmd!(m::SHUTDOWN, srvc::shutdown),
    cmd!(m::SAVE, srvc::save),
    cmd!(m::BGSAVE, srvc::bgsave),
    cmd!(m::BGREWRITEAOF, srvc::bgrewriteaof),
    cmd!(m::MONITOR, mon::monitor),
    cmd!(
        m::LATENCY,
        lat::latency_cmd,
        [
            m::LATENCY_DOCTOR,
            m::LATENCY_GRAPH,
            m::LATENCY_HELP,
            m::LATENCY_HISTOGRAM,
            m::LATENCY_HISTORY,
            m::LATENCY_LATEST,
            m::LATENCY_RESET
        ]
    ),
    cmd!(
        m::SLOWLOG,
        sl::slowlog,
        [
            m::SLOWLOG_GET,
            m::SLOWLOG_LEN,
            m::SLOWLOG_RESET,
            m::SLOWLOG_HELP
        ]
    ),
    cmd!(m::MULTI, tx::multi),
    cmd!(m::EXEC, tx::exec),
    cmd!(m::DISCARD, tx::discard),
    cmd!(m::WATCH, tx::watch),
    cmd!(m::UNWATCH, tx::unwatch),
    cmd!(m::SUBSCRIBE, ps::subscribe),
    cmd!(m::UNSUBSCRIBE, ps::unsubscribe),
    cmd!(m::PSUBSCRIBE, ps::psubscribe),
    cmd!(m::PUNSUBSCRIBE, ps::punsubscribe),
    cmd!(m::SSUBSCRIBE, ps::ssubscribe),
    cmd!(m::SUNSUBSCRIBE, ps::sunsubscribe),
    cmd!(m::PUBLISH, ps::publish),
    cmd!(m::SPUBLISH, ps::spublish),
    cmd!(
        m::PUBSUB,
        ps::pubsub,
        [
            m::PUBSUB_CHANNELS,
            m::PUBSUB_NUMSUB,
            m::PUBSUB_NUMPAT,
            m::PUBSUB_SHARDCHANNELS,
            m::PUBSUB_SHARDNUMSUB,
            m::PUBSUB_HELP
        ]
    ),
    cmd!(m::SYNC, repl::psync),
    cmd!(m::PSYNC, repl::psync),
    cmd!(m::REPLCONF, repl::replconf),
    cmd!(m::ROLE, repl::role),
    cmd!(m::WAIT, super::blocking::wait),
    cmd!(m::REPLICAOF, repl::replicaof),
    cmd!(m::FAILOVER, repl::failover),
    cmd!(m::SLAVEOF, repl::replicaof),
    cmd!(m::LASTSAVE, srvc::lastsave),
];
