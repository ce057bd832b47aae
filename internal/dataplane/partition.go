package dataplane

import "strconv"

// Topic partitions (docs/design.md §7.1, being built): a topic with K > 1
// partitions spreads its keys over K hash tags, one per partition, chosen
// so that the partitions cover Redis Cluster's slot space in K equal arcs
// whatever the topic's name. This file is the layout: which tag partition
// p of K has, and which slot a tag falls in.

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// MaxPartitions bounds a topic's partition count.
const MaxPartitions = 256

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
