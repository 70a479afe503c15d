package pagealloc

import (
	"errors"
	"fmt"
	"runtime"
)

// The profile.proto fields this file reads and writes (github.com/google/
// pprof/proto/profile.proto): a small schema, encoded by hand so the
// package needs nothing beyond the standard library.
const (
	pfSampleType = 1
	pfSample     = 2
	pfMapping    = 3
	pfLocation   = 4
	pfFunction   = 5
	pfString     = 6
	pfTimeNanos  = 9
	pfPeriodType = 11
	pfPeriod     = 12

	wireVarint = 0
	wireI64    = 1
	wireBytes  = 2
	wireI32    = 5
)

// sampleTypes are the library's and runtime/pprof's heap sample types.
var sampleTypes = [4][2]string{
	{"alloc_objects", "count"}, {"alloc_space", "bytes"},
	{"inuse_objects", "count"}, {"inuse_space", "bytes"},
}

// pbField is one field of a message as read: its number, wire type, and
// the varint or the bytes.
type pbField struct {
	num  int
	wire int
	v    uint64
	b    []byte
	raw  []byte // the whole field as encoded
}

var errBadProto = errors.New("pagealloc: malformed profile.proto")

func readVarint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errBadProto
}

// pbFields splits a message into its fields.
func pbFields(b []byte) ([]pbField, error) {
	var out []pbField
	for len(b) > 0 {
		key, n, err := readVarint(b)
		if err != nil {
			return nil, err
		}
		f := pbField{num: int(key >> 3), wire: int(key & 7)}
		start := b
		b = b[n:]
		switch f.wire {
		case wireVarint:
			if f.v, n, err = readVarint(b); err != nil {
				return nil, err
			}
		case wireBytes:
			l, m, err := readVarint(b)
			if err != nil || uint64(len(b)-m) < l {
				return nil, errBadProto
			}
			f.b = b[m : m+int(l)]
			n = m + int(l)
		case wireI64:
			n = 8
		case wireI32:
			n = 4
		default:
			return nil, errBadProto
		}
		if len(b) < n {
			return nil, errBadProto
		}
		b = b[n:]
		f.raw = start[:len(start)-len(b)]
		out = append(out, f)
	}
	return out, nil
}

// pbUints reads a repeated uint64 field's values, packed or not.
func pbUints(f pbField) ([]uint64, error) {
	if f.wire == wireVarint {
		return []uint64{f.v}, nil
	}
	var out []uint64
	for b := f.b; len(b) > 0; {
		v, n, err := readVarint(b)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		b = b[n:]
	}
	return out, nil
}

// ---- writing ---------------------------------------------------------------

type pbBuf []byte

func (b *pbBuf) varint(v uint64) {
	for v >= 0x80 {
		*b = append(*b, byte(v)|0x80)
		v >>= 7
	}
	*b = append(*b, byte(v))
}

func (b *pbBuf) uint(num int, v uint64) {
	b.varint(uint64(num)<<3 | wireVarint)
	b.varint(v)
}

func (b *pbBuf) bytes(num int, p []byte) {
	b.varint(uint64(num)<<3 | wireBytes)
	b.varint(uint64(len(p)))
	*b = append(*b, p...)
}

func (b *pbBuf) packed(num int, vs []uint64) {
	var in pbBuf
	for _, v := range vs {
		in.varint(v)
	}
	b.bytes(num, in)
}

// ---- merging ---------------------------------------------------------------

// profBuilder appends to a profile: new strings after the table's last,
// new locations and functions after the highest ids.
type profBuilder struct {
	out      pbBuf
	strs     map[string]uint64
	nstrs    uint64
	newStrs  []string
	nextLoc  uint64
	nextFunc uint64
}

func (pb *profBuilder) str(s string) uint64 {
	if i, ok := pb.strs[s]; ok {
		return i
	}
	i := pb.nstrs
	pb.nstrs++
	pb.strs[s] = i
	pb.newStrs = append(pb.newStrs, s)
	return i
}

// mergeProfile returns base (an uncompressed profile.proto from the
// library, or nil) without its samples of Calloc's blocks, with the Go
// samples added.
func mergeProfile(base []byte, gos []goSample, rate int64) ([]byte, error) {
	fields, err := pbFields(base)
	if err != nil {
		return nil, err
	}
	pb := &profBuilder{strs: map[string]uint64{}, nextLoc: 1, nextFunc: 1}
	var strs []string
	var types [][2]uint64
	locs := map[uint64]cLocation{}
	maps := map[uint64]cMapping{}
	for _, f := range fields {
		switch f.num {
		case pfString:
			strs = append(strs, string(f.b))
		case pfSampleType:
			t, err := pbFields(f.b)
			if err != nil {
				return nil, err
			}
			var vt [2]uint64
			for _, x := range t {
				if x.num == 1 || x.num == 2 {
					vt[x.num-1] = x.v
				}
			}
			types = append(types, vt)
		case pfLocation:
			l, err := readLocation(f.b)
			if err != nil {
				return nil, err
			}
			locs[l.id] = l
			if l.id >= pb.nextLoc {
				pb.nextLoc = l.id + 1
			}
		case pfMapping:
			m, err := readMapping(f.b)
			if err != nil {
				return nil, err
			}
			maps[m.id] = m
		case pfFunction:
			fs, err := pbFields(f.b)
			if err != nil {
				return nil, err
			}
			for _, x := range fs {
				if x.num == 1 && x.v >= pb.nextFunc {
					pb.nextFunc = x.v + 1
				}
			}
		}
	}
	for i, s := range strs {
		if _, ok := pb.strs[s]; !ok {
			pb.strs[s] = uint64(i)
		}
	}
	pb.nstrs = uint64(len(strs))
	if len(strs) == 0 { // a profile of our own: index 0 is ""
		pb.str("")
	}
	if len(types) == 0 {
		for _, t := range sampleTypes {
			var vt pbBuf
			vt.uint(1, pb.str(t[0]))
			vt.uint(2, pb.str(t[1]))
			pb.out.bytes(pfSampleType, vt)
		}
		var pt pbBuf
		pt.uint(1, pb.str("space"))
		pt.uint(2, pb.str("bytes"))
		pb.out.bytes(pfPeriodType, pt)
		pb.out.uint(pfPeriod, uint64(rate))
	} else {
		if len(types) != len(sampleTypes) {
			return nil, fmt.Errorf("pagealloc: the library's profile has %d sample types, not 4", len(types))
		}
		for i, t := range types {
			if t[0] >= uint64(len(strs)) || t[1] >= uint64(len(strs)) ||
				strs[t[0]] != sampleTypes[i][0] || strs[t[1]] != sampleTypes[i][1] {
				return nil, fmt.Errorf("pagealloc: the library's profile's sample type %d is not %s", i, sampleTypes[i][0])
			}
		}
	}
	calloc := callocFrames()
	for _, f := range fields {
		if f.num == pfSample && calloc != nil {
			through, err := sampleThrough(f.b, locs, calloc)
			if err != nil {
				return nil, err
			}
			if through {
				continue
			}
		}
		pb.out = append(pb.out, f.raw...)
	}
	pb.addGo(gos)
	for _, s := range pb.newStrs {
		pb.out.bytes(pfString, []byte(s))
	}
	return pb.out, nil
}

// addGo appends the Go samples, their locations (one per PC, inlined
// calls as lines) and functions.
func (pb *profBuilder) addGo(gos []goSample) {
	locOf := map[uintptr]uint64{}
	funcOf := map[[2]string]uint64{}
	var locs, funcs pbBuf
	for _, g := range gos {
		ids := make([]uint64, len(g.stk))
		for i, pc := range g.stk {
			id, ok := locOf[pc]
			if !ok {
				id = pb.nextLoc
				pb.nextLoc++
				locOf[pc] = id
				var l pbBuf
				l.uint(1, id)
				l.uint(3, uint64(pc))
				frames := runtime.CallersFrames([]uintptr{pc})
				for {
					fr, more := frames.Next()
					key := [2]string{fr.Function, fr.File}
					fid, ok := funcOf[key]
					if !ok {
						fid = pb.nextFunc
						pb.nextFunc++
						funcOf[key] = fid
						var fn pbBuf
						fn.uint(1, fid)
						fn.uint(2, pb.str(fr.Function))
						fn.uint(3, pb.str(fr.Function))
						fn.uint(4, pb.str(fr.File))
						funcs.bytes(pfFunction, fn)
					}
					var line pbBuf
					line.uint(1, fid)
					line.uint(2, uint64(fr.Line))
					l.bytes(4, line)
					if !more {
						break
					}
				}
				locs.bytes(pfLocation, l)
			}
			ids[i] = id
		}
		var s, label pbBuf
		s.packed(1, ids)
		vals := make([]uint64, 4)
		for i, v := range g.values {
			vals[i] = uint64(v)
		}
		s.packed(2, vals)
		label.uint(1, pb.str("tag"))
		label.uint(2, pb.str(g.tag))
		s.bytes(3, label)
		pb.out.bytes(pfSample, s)
	}
	pb.out = append(pb.out, locs...)
	pb.out = append(pb.out, funcs...)
}

// ---- which C samples are Calloc's -------------------------------------------

type cLocation struct {
	id, mapping, addr uint64
}

type cMapping struct {
	id, start, limit, offset uint64
	file                     uint64 // string index
}

func readLocation(b []byte) (cLocation, error) {
	fs, err := pbFields(b)
	var l cLocation
	for _, f := range fs {
		switch f.num {
		case 1:
			l.id = f.v
		case 2:
			l.mapping = f.v
		case 3:
			l.addr = f.v
		}
	}
	return l, err
}

func readMapping(b []byte) (cMapping, error) {
	fs, err := pbFields(b)
	var m cMapping
	for _, f := range fs {
		switch f.num {
		case 1:
			m.id = f.v
		case 2:
			m.start = f.v
		case 3:
			m.limit = f.v
		case 4:
			m.offset = f.v
		case 5:
			m.file = f.v
		}
	}
	return m, err
}

// addrRange is [lo, hi) in the process's addresses.
type addrRange struct{ lo, hi uint64 }

// sampleThrough says whether a sample's stack passes through one of rs.
func sampleThrough(b []byte, locs map[uint64]cLocation, rs []addrRange) (bool, error) {
	fs, err := pbFields(b)
	if err != nil {
		return false, err
	}
	for _, f := range fs {
		if f.num != 1 {
			continue
		}
		ids, err := pbUints(f)
		if err != nil {
			return false, err
		}
		for _, id := range ids {
			a := locs[id].addr
			for _, r := range rs {
				if a > r.lo && a < r.hi { // a return address: past the call
					return true, nil
				}
			}
		}
	}
	return false, nil
}
