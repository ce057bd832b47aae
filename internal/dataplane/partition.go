package dataplane

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/delayq/delayq/queue"
)

// Topic partitions (docs/design.md §7.1): a topic with K > 1 partitions
// spreads its keys over K hash tags, one per partition, chosen so that the
// partitions cover Redis Cluster's slot space in K equal arcs whatever the
// topic's name. This file is the naming: which tag partition p of K has,
// which slot a tag falls in, which partition a job goes to, and which
// topic a partition's name belongs to.
//
// Below the public operations a partition is a topic of its own: its name
// (the tag) builds its keys, names its ledger rows, and goes into a
// claimed job's Ref, so the scripts, the ledger, the relay and recovery
// work on it unchanged. What the user sees is the topic: TopicOf.

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// MaxPartitions bounds a topic's partition count.
const MaxPartitions = queue.MaxPartitions

// partitionTag returns the hash tag (the text between the braces of every
// key) of partition p (0 ≤ p < k) of topic when it has k partitions. With
// one partition it is the topic's name: today's layout, so a topic that
// never had more keeps its keys. Otherwise it is topic~k.p~n, with n the
// smallest non-negative number that puts the tag's slot in the partition's
// arc of the slot space, [p·16384/k, (p+1)·16384/k): the partitions of a
// topic then sit in K equal consecutive arcs, so a cluster whose masters
// own equal consecutive ranges (what redis-cli --cluster create makes)
// holds K/masters of them each when masters divide K, one more or less
// otherwise. "~" cannot appear in a topic's name, so no tag of one topic
// is another's; k is in the tag, so two layouts of a topic (while its
// partition count changes) never share keys. Finding n takes about k
// tries of CRC16 on a few bytes.
func partitionTag(topic string, k, p int) string {
	if k <= 1 {
		return topic
	}
	lo, hi := p*clusterSlots/k, (p+1)*clusterSlots/k
	prefix := topic + "~" + strconv.Itoa(k) + "." + strconv.Itoa(p) + "~"
	for n := 0; ; n++ {
		tag := prefix + strconv.Itoa(n)
		if s := tagSlot(tag); s >= lo && s < hi {
			return tag
		}
	}
}

// tagSlot is the Redis Cluster slot of every key whose hash tag is tag:
// CRC16 (XMODEM: polynomial 0x1021, initial value 0) of the tag, modulo
// 16384, as the cluster specification defines it.
func tagSlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// partitionSep starts the partition part of a partition's name. It is not
// in a topic's alphabet, so a name with it is a partition's.
const partitionSep = '~'

// TopicOf returns the topic that name (a topic's or a partition's) belongs
// to: the part before "~", or name itself.
func TopicOf(name string) string { return queue.TopicOf(name) }

// IsPartition says name is a partition's (topic~k.p~n), not a topic's.
func IsPartition(name string) bool { return strings.IndexByte(name, partitionSep) >= 0 }

// validateName checks a data-plane name: a valid topic, or exactly the
// tag partitionTag gives one of its partitions (so no other name with a
// "~" ever builds a key).
func validateName(name string) error {
	if !IsPartition(name) {
		return ValidateTopic(name)
	}
	topic, k, p, ok := parsePartition(name)
	if !ok || ValidateTopic(topic) != nil || partitionTag(topic, k, p) != name {
		return &ValidationError{Field: "topic", Kind: ErrInvalidTopic,
			Reason: fmt.Sprintf("%q: not a topic's partition", truncateKey(name))}
	}
	return nil
}

// parsePartition splits topic~k.p~n into its topic, k and p.
func parsePartition(name string) (topic string, k, p int, ok bool) {
	topic, rest, ok := strings.Cut(name, string(partitionSep))
	if !ok {
		return "", 0, 0, false
	}
	kp, _, ok := strings.Cut(rest, string(partitionSep))
	if !ok {
		return "", 0, 0, false
	}
	ks, ps, ok := strings.Cut(kp, ".")
	if !ok {
		return "", 0, 0, false
	}
	k, err1 := strconv.Atoi(ks)
	p, err2 := strconv.Atoi(ps)
	if err1 != nil || err2 != nil || k < 2 || k > MaxPartitions || p < 0 || p >= k {
		return "", 0, 0, false
	}
	return topic, k, p, true
}

// PartitionOf returns the partition (0 ≤ p < k) of a job: FNV-1a of its
// partition key, or of its id without one, modulo k. Not CRC16, the
// slots' hash, so that which partition a job lands on and which slot that
// partition's tag has are not correlated.
func PartitionOf(key, id string, k int) int {
	if k <= 1 {
		return 0
	}
	if key == "" {
		key = id
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum64() % uint64(k))
}

// PartitionName returns the name (the tag) of partition p of topic when
// it has k partitions: topic itself when k is 1.
func PartitionName(topic string, k, p int) string { return partitionTag(topic, k, p) }

// ShardOf is the ledger shard (0 to n-1) whose SQL server holds the rows of
// name, a topic's or a partition's (docs/design.md §7.1): partition p of
// any count is on shard p mod n, so that a topic of K partitions, K a
// multiple of n, has K/n on each shard, and a raise moves no row; a topic
// of one partition (its own name) is on the shard of FNV-1a of its name
// mod n.
func ShardOf(name string, n int) int {
	if n <= 1 {
		return 0
	}
	if _, _, p, ok := parsePartition(name); ok {
		return p % n
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(n))
}
