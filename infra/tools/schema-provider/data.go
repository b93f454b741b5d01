package main

// The rehearsal's data sources: the root module's two. data "google_project"
// answers for the configured project with a stand-in number; data
// "archive_file" really zips, so that the source object's name (its MD5) and
// the uploaded file are the real ones.

import (
	"archive/zip"
	"bytes"
	"crypto/md5"  //nolint:gosec // the archive provider's output_md5
	"crypto/sha1" //nolint:gosec // the archive provider's output_sha
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

var rehearsedDataSources = map[string]bool{"google_project": true, "archive_file": true}

func (r *rehearsal) readDataSource(schema *tfprotov5.Schema, req *tfprotov5.ReadDataSourceRequest) (*tfprotov5.ReadDataSourceResponse, error) {
	if schema == nil {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: rehearsalError("unknown data source", req.TypeName+" is not served by this stand-in")}, nil
	}
	typ := schema.ValueType()
	config, err := req.Config.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	var attributes map[string]tftypes.Value
	if err := config.As(&attributes); err != nil {
		return nil, err
	}
	var set map[string]interface{}
	switch req.TypeName {
	case "google_project":
		set = r.projectData(topLevel(config))
	case "archive_file":
		set, err = archive(topLevel(config), stringSet(attributes["excludes"]), attributes["source"])
		if err != nil {
			return &tfprotov5.ReadDataSourceResponse{Diagnostics: rehearsalError("archive_file", err.Error())}, nil
		}
	}
	object := typ.(tftypes.Object)
	for name, value := range set {
		attributes[name] = tftypes.NewValue(object.AttributeTypes[name], value)
	}
	state, err := tfprotov5.NewDynamicValue(typ, tftypes.NewValue(typ, attributes))
	if err != nil {
		return nil, err
	}
	return &tfprotov5.ReadDataSourceResponse{State: &state}, nil
}

// projectData answers data "google_project": the project the configuration names
// (else the provider's), its number from SCHEMA_PROVIDER_PROJECT_NUMBER.
func (r *rehearsal) projectData(config map[string]string) map[string]interface{} {
	project := config["project_id"]
	if project == "" {
		project, _ = r.defaults()
	}
	return map[string]interface{}{
		"project_id": project,
		"id":         "projects/" + project,
		"name":       project,
		"number":     r.projectNumber,
	}
}

func stringSet(value tftypes.Value) []string {
	if value.IsNull() || !value.IsKnown() {
		return nil
	}
	var elements []tftypes.Value
	if value.As(&elements) != nil {
		return nil
	}
	var result []string
	for _, element := range elements {
		var text string
		if element.As(&text) == nil {
			result = append(result, text)
		}
	}
	return result
}

// archive writes the zip data "archive_file" describes and returns its
// computed attributes. Like hashicorp/archive's zip archiver: the files in
// lexical walk order, deflated, with a zero modification time and their own
// modes (or output_file_mode); excludes are globs relative to source_dir,
// ** matching any number of directories, an excluded directory skipped whole.
// The bytes need not equal the real provider's, but the hashes are this
// file's own.
func archive(config map[string]string, excludes []string, sourceBlocks tftypes.Value) (map[string]interface{}, error) {
	if kind := config["type"]; kind != "zip" {
		return nil, fmt.Errorf("the rehearsal only zips (type = %q)", kind)
	}
	if !sourceBlocks.IsNull() && sourceBlocks.IsKnown() {
		var blocks []tftypes.Value
		if sourceBlocks.As(&blocks) == nil && len(blocks) > 0 {
			return nil, fmt.Errorf("source blocks are not rehearsed; use source_dir, source_file or source_content")
		}
	}
	output := config["output_path"]
	if output == "" {
		return nil, fmt.Errorf("output_path is required")
	}
	var mode *os.FileMode
	if text := config["output_file_mode"]; text != "" {
		parsed, err := strconv.ParseUint(text, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("output_file_mode %q: %w", text, err)
		}
		m := os.FileMode(parsed)
		mode = &m
	}
	var buffer bytes.Buffer
	writer := zip.NewWriter(&buffer)
	var err error
	switch {
	case config["source_dir"] != "":
		err = zipDir(writer, config["source_dir"], excludes, mode)
	case config["source_file"] != "":
		err = zipFile(writer, config["source_file"], filepath.Base(config["source_file"]), mode)
	case config["source_content_filename"] != "":
		err = zipContent(writer, config["source_content_filename"], []byte(config["source_content"]), mode)
	default:
		err = fmt.Errorf("one of source_dir, source_file or source_content is required")
	}
	if err == nil {
		err = writer.Close()
	}
	if err != nil {
		return nil, err
	}
	content := buffer.Bytes()
	if err := os.MkdirAll(filepath.Dir(output), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(output, content, 0o644); err != nil {
		return nil, err
	}
	sha1Sum := sha1.Sum(content) //nolint:gosec // the provider's output_sha
	md5Sum := md5.Sum(content)   //nolint:gosec // the provider's output_md5
	sha256Sum := sha256.Sum256(content)
	sha512Sum := sha512.Sum512(content)
	return map[string]interface{}{
		"id":                  hex.EncodeToString(sha1Sum[:]),
		"output_sha":          hex.EncodeToString(sha1Sum[:]),
		"output_md5":          hex.EncodeToString(md5Sum[:]),
		"output_sha256":       hex.EncodeToString(sha256Sum[:]),
		"output_sha512":       hex.EncodeToString(sha512Sum[:]),
		"output_base64sha256": base64.StdEncoding.EncodeToString(sha256Sum[:]),
		"output_base64sha512": base64.StdEncoding.EncodeToString(sha512Sum[:]),
		"output_size":         big.NewFloat(float64(len(content))),
	}, nil
}

func zipDir(writer *zip.Writer, dir string, excludes []string, mode *os.FileMode) error {
	// The walk starts from the directory itself even when dir is a symbolic link to it.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("source_dir %s: %w", dir, err)
	}
	var names []string
	files := map[string]string{}
	err = filepath.WalkDir(root, func(file string, entry fs.DirEntry, walkErr error) error {
		if walkErr != nil {
			return walkErr
		}
		relative, err := filepath.Rel(root, file)
		if err != nil || relative == "." {
			return err
		}
		relative = filepath.ToSlash(relative)
		excluded := excludedBy(relative, excludes)
		if entry.IsDir() {
			if excluded {
				return filepath.SkipDir
			}
			return nil
		}
		if !excluded {
			names = append(names, relative)
			files[relative] = file
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := zipFile(writer, files[name], name, mode); err != nil {
			return err
		}
	}
	return nil
}

func zipFile(writer *zip.Writer, file, name string, mode *os.FileMode) error {
	info, err := os.Stat(file) // a symbolic link's target
	if err != nil {
		return err
	}
	content, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	header, err := zip.FileInfoHeader(info)
	if err != nil {
		return err
	}
	header.Name = name
	if mode != nil {
		header.SetMode(*mode)
	}
	return writeEntry(writer, header, content)
}

func zipContent(writer *zip.Writer, name string, content []byte, mode *os.FileMode) error {
	header := &zip.FileHeader{Name: name}
	if mode != nil {
		header.SetMode(*mode)
	}
	return writeEntry(writer, header, content)
}

func writeEntry(writer *zip.Writer, header *zip.FileHeader, content []byte) error {
	header.Method = zip.Deflate
	header.SetModTime(time.Time{}) //nolint:staticcheck // a zero time, as the archive provider writes
	entry, err := writer.CreateHeader(header)
	if err != nil {
		return err
	}
	_, err = entry.Write(content)
	return err
}

// excludedBy says whether the slash-separated relative path matches one of the
// glob patterns (path.Match per segment, ** for any number of segments).
func excludedBy(relative string, patterns []string) bool {
	for _, pattern := range patterns {
		pattern = strings.TrimPrefix(filepath.ToSlash(pattern), "./")
		if pattern == relative || globMatch(strings.Split(pattern, "/"), strings.Split(relative, "/")) {
			return true
		}
	}
	return false
}

func globMatch(pattern, segments []string) bool {
	if len(pattern) == 0 {
		return len(segments) == 0
	}
	if pattern[0] == "**" {
		for skip := 0; skip <= len(segments); skip++ {
			if globMatch(pattern[1:], segments[skip:]) {
				return true
			}
		}
		return false
	}
	if len(segments) == 0 {
		return false
	}
	if matched, err := path.Match(pattern[0], segments[0]); err != nil || !matched {
		return false
	}
	return globMatch(pattern[1:], segments[1:])
}
