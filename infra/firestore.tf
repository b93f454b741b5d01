# --- Data ----------------------------------------------------------------------

resource "google_firestore_database" "default" {
  project     = var.project_id
  name        = "(default)" # the client libraries' default, which the functions use
  location_id = var.region
  type        = "FIRESTORE_NATIVE"
  # `terraform destroy` really deletes the counters, so the next deployment starts from zero.
  deletion_policy         = "DELETE"
  delete_protection_state = "DELETE_PROTECTION_DISABLED"

  depends_on = [google_project_service.this]
}

# Dedup markers expire by themselves after MARKER_TTL_DAYS.
resource "google_firestore_field" "marker_ttl" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = local.catalogue.firestore.markers
  field      = local.catalogue.firestore.marker_expiry_field

  ttl_config {}
  # No single-field indexes on a TTL timestamp: they are never queried and
  # would only slow down writes.
  index_config {}
}

# The marker's other fields, none of them indexed either: nothing queries the markers (the function
# creates one by its id, the kit reads them by id), and by default Firestore keeps an ascending and a
# descending single-field index entry of every field of every document, written with the document.
# With every field exempt, a marker writes no index entry but the document's own. "As a best practice,
# you should remove unused indexes to reduce storage costs and improve write performance. By default,
# Cloud Firestore builds a single-field index for each field in a document. You can control single-field
# indexing by defining index exemptions but with a maximum of 200 single-field index exemptions per
# database." (https://firebase.google.com/docs/firestore/solutions/index-map-field)
locals {
  # Every field functions/store_inc_counter.py writes into a marker, but the TTL field above
  # (tests/unit/test_settings.py holds this list to the function's code).
  marker_unindexed_fields = ["visit_type"]
}

resource "google_firestore_field" "marker_unindexed" {
  for_each = toset(local.marker_unindexed_fields)

  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = local.catalogue.firestore.markers
  field      = each.value

  # An empty index_config disables every single-field index of the field (the provider's schema:
  # "Configuring the index configuration with an empty block disables all indexes on the field").
  index_config {}

  # After the TTL field, not beside it: field operations run at once on one database have been refused
  # ("Cannot create more than one Firestore index exemption per collection",
  # https://github.com/hashicorp/terraform-provider-google/issues/14997; a 409 "Please retry, underlying
  # data changed", which the provider now retries: issues/16329).
  depends_on = [google_firestore_field.marker_ttl]
}

# --- The pull store's batches (store_mode = "pull", iteration 7) ---------------------------------
# One visit_batches document per committed batch: its visit ids, its pages' counts, the publish times it
# covers, its writer and its expiry. The puller queries published_to alone (to load its dedup window), so
# every other field is exempt from single-field indexing: ids alone (up to pull.batch_size strings) would
# otherwise write two index entries per visit, the very writes the pull store saves. expire_at is the TTL
# field, exempt like the markers'. Push mode creates none of these.
locals {
  # The catalogue names the collection (shared with the functions and the audit).
  batches_collection = local.catalogue.firestore.batches
  # Created one after the other (below): index exemptions on one collection created at once have been refused.
  batch_unindexed_fields = ["ids", "pages", "writer", "published_from"]
}

resource "google_firestore_field" "batch_ttl" {
  count = local.pull ? 1 : 0

  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = local.batches_collection
  field      = "expire_at"

  ttl_config {}
  index_config {}

  depends_on = [google_firestore_field.marker_unindexed]
}

resource "google_firestore_field" "batch_ids" {
  count = local.pull ? 1 : 0

  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = local.batches_collection
  field      = local.batch_unindexed_fields[0]
  index_config {}

  depends_on = [google_firestore_field.batch_ttl]
}

resource "google_firestore_field" "batch_pages" {
  count = local.pull ? 1 : 0

  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = local.batches_collection
  field      = local.batch_unindexed_fields[1]
  index_config {}

  depends_on = [google_firestore_field.batch_ids]
}

resource "google_firestore_field" "batch_writer" {
  count = local.pull ? 1 : 0

  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = local.batches_collection
  field      = local.batch_unindexed_fields[2]
  index_config {}

  depends_on = [google_firestore_field.batch_pages]
}

resource "google_firestore_field" "batch_published_from" {
  count = local.pull ? 1 : 0

  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = local.batches_collection
  field      = local.batch_unindexed_fields[3]
  index_config {}

  depends_on = [google_firestore_field.batch_writer]
}
