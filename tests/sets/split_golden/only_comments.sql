-- nothing but comments
/* here; */
