# --- Function images -----------------------------------------------------------

# The functions' images, in a repository of our own rather than the gcf-artifacts one Cloud
# Functions would create at the first build: the build account writes to this one alone.
resource "google_artifact_registry_repository" "functions" {
  # checkov:skip=CKV_GCP_84: the images hold only this repository's public code; Google-managed encryption is enough.
  project       = var.project_id
  location      = var.region
  repository_id = "visitkit-functions"
  format        = "DOCKER"
  description   = "Visit counter: the images Cloud Build makes of the functions"

  depends_on = [google_project_service.this]
}

# Artifact Registry Writer, "for storing build images in Artifact Registry"
# (https://cloud.google.com/run/docs/configuring/services/build-service-account), granted on the
# repository the builds use (docker_repository, functions.tf) rather than the project: the Cloud
# Functions page lets it be set in the repository's IAM policy, on gcf-artifacts by default or on your
# own repository given as dockerRepository (https://cloud.google.com/functions/docs/securing/build-custom-sa).
resource "google_artifact_registry_repository_iam_member" "build_pushes_images" {
  project    = var.project_id
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}

# --- Function source -----------------------------------------------------------

resource "google_storage_bucket" "source" {
  # checkov:skip=CKV_GCP_62: access logs of a bucket holding only our own zipped source add cost, not insight.
  # checkov:skip=CKV_GCP_78: each upload has its own content-addressed name; versioning would only keep garbage.
  project                     = var.project_id
  name                        = "${var.project_id}-visitkit-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true # destroy must not stop at old source zips

  depends_on = [google_project_service.this]
}

data "archive_file" "functions" {
  type        = "zip"
  source_dir  = "${path.module}/../functions"
  output_path = "${path.module}/../build/functions.zip"
  excludes    = ["**/__pycache__", "**/*.pyc"]
}

resource "google_storage_bucket_object" "functions" {
  # A new name for new content makes the functions redeploy.
  name   = "functions-${data.archive_file.functions.output_md5}.zip"
  bucket = google_storage_bucket.source.name
  source = data.archive_file.functions.output_path
}

# --- The build grants' wait ----------------------------------------------------

# New IAM grants take a while to propagate, and a build started at once may be refused. The google
# provider's own example of a function built by a custom build account
# (google_cloudfunctions2_function) puts a 60 s time_sleep between the grants and the function;
# the time provider is not one this kit uses, so this is Terraform's built-in terraform_data with
# a local sleep (a POSIX shell's). Its triggers are the build account's grants: it is replaced,
# and sleeps again, only when one of them changes (not when only the number of seconds does).
# build_grants_wait_seconds = 0 creates nothing, and runs no command.
resource "terraform_data" "build_grants_wait" {
  count = var.build_grants_wait_seconds > 0 ? 1 : 0

  triggers_replace = merge(
    { for key, grant in google_project_iam_member.this : key => { role = grant.role, member = grant.member, on = "project ${grant.project}", condition = try(one(grant.condition).expression, "") } if startswith(key, "build-") },
    {
      "build-source-objects" = {
        role      = google_storage_bucket_iam_member.build_source_objects.role
        member    = google_storage_bucket_iam_member.build_source_objects.member
        on        = "bucket ${google_storage_bucket_iam_member.build_source_objects.bucket}"
        condition = ""
      }
      "build-pushes-images" = {
        role      = google_artifact_registry_repository_iam_member.build_pushes_images.role
        member    = google_artifact_registry_repository_iam_member.build_pushes_images.member
        on        = "repository ${google_artifact_registry_repository_iam_member.build_pushes_images.repository}"
        condition = ""
      }
    },
  )
  input = var.build_grants_wait_seconds

  provisioner "local-exec" {
    command = "sleep ${self.input}"
  }
}
