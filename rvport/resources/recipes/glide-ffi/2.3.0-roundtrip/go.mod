// rvport's smoke program for glide-ffi: GLIDE's Go client, linked with the riscv64 libglide_ffi.a that the
// recipe builds, against a real valkey-server. The client and its two module dependencies are pinned git
// sources of the recipe (by commit and tree digest), unpacked beside this module; nothing is downloaded.
module rvport.invalid/glide-roundtrip

go 1.22

require (
	github.com/google/uuid v1.6.0
	github.com/valkey-io/valkey-glide/go/v2 v2.3.0
	google.golang.org/protobuf v1.33.0
)

replace (
	github.com/google/uuid => ../uuid
	github.com/valkey-io/valkey-glide/go/v2 => ../glide/go
	google.golang.org/protobuf => ../protobuf
)
