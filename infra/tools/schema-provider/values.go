package main

// What an apply fills in: the values Google computes, in the shapes it gives
// them, for the attributes the kit and its configuration read; a plain
// stand-in value (rehearsal.go's standIn) for everything else.

import (
	"crypto/md5" //nolint:gosec // Cloud Storage's md5Hash, not a security use
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// documentationAddress is the global address an edge load balancer gets: from
// TEST-NET-3 (RFC 5737), reserved for documentation, so it never reaches anyone.
const documentationAddress = "203.0.113.10"

// resource is one resource being applied: its known top-level attributes and
// where it lives (its own project/location, else the provider's).
type resource struct {
	typeName   string
	attributes map[string]string
	project    string
	location   string
	number     string // the project's number (SCHEMA_PROVIDER_PROJECT_NUMBER)
	generation int64  // a Cloud Storage object generation, shared by its attributes
	now        string
}

func newResource(typeName string, planned tftypes.Value, project, region, number string) *resource {
	attributes := topLevel(planned)
	if attributes["project"] != "" {
		project = attributes["project"]
	}
	location := region
	for _, key := range []string{"location", "region"} {
		if attributes[key] != "" {
			location = attributes[key]
			break
		}
	}
	now := time.Now().UTC()
	return &resource{typeName: typeName, attributes: attributes, project: project, location: location,
		number: number, generation: now.UnixMicro(), now: now.Format(time.RFC3339Nano)}
}

func (r *resource) name() string { return r.attributes["name"] }

// runURL is the URL Cloud Run shows for a service: "Cloud Run assigns a hash-based non-deterministic
// URL to all services. If the service name length allows it, Cloud Run also assigns a deterministic
// URL to the service ... The deterministic URL is given priority when displayed", the deterministic
// one being https://SERVICE-PROJECT_NUMBER.REGION.run.app
// (https://cloud.google.com/run/docs/triggering/https-request, "Service URL", "Deterministic URL").
func (r *resource) runURL(service string) string {
	return "https://" + service + "-" + r.number + "." + r.location + ".run.app"
}

func (r *resource) fill(path *tftypes.AttributePath, typ tftypes.Type) (tftypes.Value, error) {
	at := pathString(path)
	switch {
	case typ.Is(tftypes.String):
		if text, ok := r.text(at); ok {
			return tftypes.NewValue(typ, text), nil
		}
		switch lastName(path) {
		case "create_time", "update_time", "creation_timestamp", "time_created", "updated":
			return tftypes.NewValue(typ, r.now), nil
		case "delete_time", "expire_time": // set only on deleted resources
			return tftypes.NewValue(typ, ""), nil
		}
	case typ.Is(tftypes.Number):
		if number, ok := r.numberAt(at); ok {
			return tftypes.NewValue(typ, number), nil
		}
	case typ.Equal(tftypes.List{ElementType: tftypes.String}) && r.typeName == "google_cloud_run_v2_service" && at == "urls":
		return tftypes.NewValue(typ, []tftypes.Value{tftypes.NewValue(tftypes.String, r.runURL(r.name()))}), nil
	}
	return standIn(path, typ)
}

// text is the value Google gives the string attribute at path, if it is one the rehearsal knows.
func (r *resource) text(at string) (string, bool) {
	p, l, n := r.project, r.location, r.name()
	switch r.typeName {
	case "google_cloudfunctions2_function":
		switch at {
		case "id":
			return "projects/" + p + "/locations/" + l + "/functions/" + n, true
		case "url": // https://cloud.google.com/functions/docs/calling/http ("cloudfunctions.net URL")
			return "https://" + l + "-" + p + ".cloudfunctions.net/" + n, true
		case "state":
			return "ACTIVE", true
		case "environment":
			return "GEN_2", true
		case "service_config.0.uri":
			return r.runURL(n), true
		case "service_config.0.service":
			// The Cloud Run service's full name, as Cloud Functions reports it:
			// projects/{project}/locations/{location}/services/{service}
			// (hashicorp/terraform-provider-google#20320).
			return "projects/" + p + "/locations/" + l + "/services/" + n, true
		}
	case "google_cloud_run_v2_service":
		switch at {
		case "id":
			return "projects/" + p + "/locations/" + l + "/services/" + n, true
		case "uri":
			return r.runURL(n), true
		case "latest_ready_revision", "latest_created_revision":
			return "projects/" + p + "/locations/" + l + "/services/" + n + "/revisions/" + n + "-00001-reh", true
		case "generation", "observed_generation":
			return "1", true
		case "uid":
			return uuidFrom(r.typeName + "/" + p + "/" + l + "/" + n), true
		}
	case "google_service_account":
		email := r.attributes["account_id"] + "@" + p + ".iam.gserviceaccount.com"
		switch at {
		case "email":
			return email, true
		case "id", "name":
			return "projects/" + p + "/serviceAccounts/" + email, true
		case "member":
			return "serviceAccount:" + email, true
		case "unique_id":
			return digitsFrom(email, 21), true
		}
	case "google_pubsub_topic":
		if at == "id" {
			return "projects/" + p + "/topics/" + n, true
		}
	case "google_pubsub_subscription":
		if at == "id" {
			return "projects/" + p + "/subscriptions/" + n, true
		}
	case "google_storage_bucket":
		switch at {
		case "id":
			return n, true
		case "url":
			return "gs://" + n, true
		case "self_link":
			return "https://www.googleapis.com/storage/v1/b/" + n, true
		}
	case "google_storage_bucket_object":
		return r.objectText(at)
	case "google_artifact_registry_repository":
		switch at {
		case "id":
			return "projects/" + p + "/locations/" + l + "/repositories/" + r.attributes["repository_id"], true
		case "name":
			return r.attributes["repository_id"], true
		}
	case "google_project_service":
		if at == "id" {
			return p + "/" + r.attributes["service"], true
		}
	case "google_firestore_database":
		switch at {
		case "id":
			return "projects/" + p + "/databases/" + n, true
		case "uid":
			return uuidFrom(r.typeName + "/" + p + "/" + n), true
		}
	case "google_firestore_field":
		if at == "id" || at == "name" {
			database := r.attributes["database"]
			if database == "" {
				database = "(default)"
			}
			return "projects/" + p + "/databases/" + database + "/collectionGroups/" + r.attributes["collection"] + "/fields/" + r.attributes["field"], true
		}
	case "google_logging_metric":
		if at == "id" {
			return n, true
		}
	case "google_logging_project_exclusion":
		if at == "id" {
			return "projects/" + p + "/exclusions/" + n, true
		}
	case "google_monitoring_alert_policy":
		policy := "projects/" + p + "/alertPolicies/" + digitsFrom(r.attributes["display_name"], 19)
		if at == "id" || at == "name" {
			return policy, true
		}
		if strings.HasPrefix(at, "conditions.") && strings.HasSuffix(at, ".name") {
			return policy + "/conditions/" + digitsFrom(policy+at, 19), true
		}
	case "google_compute_global_address":
		if at == "address" {
			return documentationAddress, true
		}
	}
	if strings.HasPrefix(r.typeName, "google_compute_") && (at == "id" || at == "self_link") {
		if id, ok := r.computeID(); ok {
			if at == "self_link" {
				return "https://www.googleapis.com/compute/v1/" + id, true
			}
			return id, true
		}
	}
	if strings.HasSuffix(r.typeName, "_iam_member") {
		switch at {
		case "etag":
			return "BwY" + base64.StdEncoding.EncodeToString([]byte(digitsFrom(r.typeName+r.attributes["member"], 6))), true
		case "id":
			return r.iamID(), true
		}
	}
	return "", false
}

// computeID is a Compute Engine resource's relative name: projects/P/global/KIND/NAME, or
// projects/P/regions/R/KIND/NAME for the regional ones.
func (r *resource) computeID() (string, bool) {
	kinds := map[string]string{
		"google_compute_global_address":                "global/addresses",
		"google_compute_backend_service":               "global/backendServices",
		"google_compute_global_forwarding_rule":        "global/forwardingRules",
		"google_compute_managed_ssl_certificate":       "global/sslCertificates",
		"google_compute_security_policy":               "global/securityPolicies",
		"google_compute_ssl_policy":                    "global/sslPolicies",
		"google_compute_target_http_proxy":             "global/targetHttpProxies",
		"google_compute_target_https_proxy":            "global/targetHttpsProxies",
		"google_compute_url_map":                       "global/urlMaps",
		"google_compute_region_network_endpoint_group": "regions/" + r.location + "/networkEndpointGroups",
	}
	kind, ok := kinds[r.typeName]
	if !ok {
		return "", false
	}
	return "projects/" + r.project + "/" + kind + "/" + r.name(), true
}

// iamID follows the provider's IDs of IAM members: the resource, the role and the member.
func (r *resource) iamID() string {
	a := r.attributes
	var on string
	switch r.typeName {
	case "google_project_iam_member":
		on = r.project
	case "google_storage_bucket_iam_member":
		on = "b/" + a["bucket"]
	case "google_pubsub_topic_iam_member":
		on = "projects/" + r.project + "/topics/" + a["topic"]
	case "google_pubsub_subscription_iam_member":
		on = "projects/" + r.project + "/subscriptions/" + a["subscription"]
	case "google_service_account_iam_member":
		on = a["service_account_id"]
	case "google_artifact_registry_repository_iam_member":
		on = "projects/" + r.project + "/locations/" + r.location + "/repositories/" + a["repository"]
	case "google_cloud_run_v2_service_iam_member":
		on = a["name"]
		if !strings.HasPrefix(on, "projects/") {
			on = "projects/" + r.project + "/locations/" + r.location + "/services/" + on
		}
	default:
		on = r.typeName
	}
	return on + "/" + a["role"] + "/" + a["member"]
}

// objectText is a Cloud Storage object's computed strings; its hashes are the uploaded file's.
func (r *resource) objectText(at string) (string, bool) {
	bucket, name := r.attributes["bucket"], r.name()
	switch at {
	case "id":
		return bucket + "-" + name, true
	case "output_name":
		return name, true
	case "self_link":
		return "https://www.googleapis.com/storage/v1/b/" + bucket + "/o/" + name, true
	case "media_link":
		return "https://storage.googleapis.com/download/storage/v1/b/" + bucket + "/o/" + name +
			"?generation=" + big.NewInt(r.generation).String() + "&alt=media", true
	case "storage_class":
		return "STANDARD", true
	case "kms_key_name", "content":
		return "", true
	case "content_type":
		if strings.HasSuffix(name, ".zip") {
			return "application/zip", true
		}
		return "application/octet-stream", true
	case "md5hash", "md5hexhash", "crc32c":
		content, err := r.objectContent()
		if err != nil {
			return "", false
		}
		sum := md5.Sum(content) //nolint:gosec // Cloud Storage's md5Hash
		switch at {
		case "md5hash":
			return base64.StdEncoding.EncodeToString(sum[:]), true
		case "md5hexhash":
			return hex.EncodeToString(sum[:]), true
		}
		// crc32c: CRC32C (Castagnoli), base64 of its 4 big-endian bytes, as Cloud Storage gives it.
		checksum := make([]byte, 4)
		binary.BigEndian.PutUint32(checksum, crc32.Checksum(content, crc32.MakeTable(crc32.Castagnoli)))
		return base64.StdEncoding.EncodeToString(checksum), true
	}
	return "", false
}

func (r *resource) objectContent() ([]byte, error) {
	if r.attributes["source"] != "" {
		return os.ReadFile(r.attributes["source"])
	}
	return []byte(r.attributes["content"]), nil
}

func (r *resource) numberAt(at string) (*big.Float, bool) {
	switch {
	case r.typeName == "google_storage_bucket" && at == "project_number":
		number, ok := new(big.Float).SetString(r.number)
		return number, ok
	case r.typeName == "google_storage_bucket_object" && at == "generation":
		return new(big.Float).SetInt64(r.generation), true
	}
	return nil, false
}

// digitsFrom is a stable string of n decimal digits derived from seed (not starting with 0).
func digitsFrom(seed string, n int) string {
	var digits strings.Builder
	for round := 0; digits.Len() < n; round++ {
		sum := sha256.Sum256([]byte(seed + "#" + big.NewInt(int64(round)).String()))
		for _, b := range sum {
			if digits.Len() == n {
				break
			}
			d := int(b) % 10
			if digits.Len() == 0 && d == 0 {
				d = 1
			}
			digits.WriteByte(byte('0' + d))
		}
	}
	return digits.String()
}

// uuidFrom is a stable UUID-shaped string derived from seed.
func uuidFrom(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
